"""Where a provider publishes the warning that a spot instance is about to be reclaimed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PreemptionNoticeSource:
    """`inside_url` is polled on the instance itself (the notice arrives there first);
    `outside` says how the controller sees a preemption from outside the instance."""

    inside_url: str | None
    inside_headers: tuple[tuple[str, str], ...]
    lead_time_s: int | None  # how long before the reclaim the notice appears
    outside: str


AWS_NOTICE = PreemptionNoticeSource(
    # 404 until AWS schedules the interruption, then {"action": "terminate|stop", "time": ...}.
    # IMDSv2 needs a token (PUT /latest/api/token) sent as X-aws-ec2-metadata-token.
    inside_url="http://169.254.169.254/latest/meta-data/spot/instance-action",
    inside_headers=(("X-aws-ec2-metadata-token", "<token from PUT /latest/api/token>"),),
    lead_time_s=120,
    outside="DescribeInstances: State + StateReason.Code 'Server.SpotInstanceTermination'",
)

GCP_NOTICE = PreemptionNoticeSource(
    # "TRUE" once the VM is being preempted; ?wait_for_change=true blocks until it changes.
    inside_url="http://metadata.google.internal/computeMetadata/v1/instance/preempted",
    inside_headers=(("Metadata-Flavor", "Google"),),
    lead_time_s=30,
    outside="zone operations with operationType 'compute.instances.preempted'",
)

FAKE_NOTICE = PreemptionNoticeSource(
    inside_url=None,
    inside_headers=(),
    lead_time_s=0,
    outside="FakeProvider.preempt() marks the instance terminated and preempted",
)
