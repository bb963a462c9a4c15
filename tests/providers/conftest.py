"""Harnesses that put each provider in front of its most faithful local backend:

* aws  -> the real boto3 client against a real moto_server process (session-scoped; each test in a moto account of its own)
* gcp  -> the real google-cloud-compute REST client against tests/providers/gce_server.py
* fake -> launcher.providers.fake.FakeProvider in memory

Each harness seeds instances the way a Pulumi stack (or a user, for unmanaged ones) would have
created them, so the contract suite can run unchanged against all three.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from launcher.providers.base import IdleSignals, Provider
from tests.providers.gce_server import GceServer

GCP_PROJECT = "test-proj"
AMI = "ami-12c6146b"  # one of moto's built-in AMIs


@dataclass
class Harness:
    name: str
    provider: Provider
    places: tuple[str, str]  # where to seed: AWS regions / GCP zones / fake regions

    def region_of(self, place: str) -> str:
        return place

    # Implemented per backend ------------------------------------------------------------------
    def seed(self, place, n, tags, *, spot=True, instance_type=None) -> list[str]:
        raise NotImplementedError

    def backend_state(self, place: str, instance_id: str) -> str | None:
        """The state as the backend itself stores it (bypasses the provider under test)."""
        raise NotImplementedError

    def set_utilization(self, place, instance_id, gpu_pct, cpu_pct, minutes_ago=range(1, 60)) -> bool:
        """Publish metrics the provider's idle_signals reads (one point per minute ago given);
        False where unsupported."""
        return False

    def preempt(self, place, instance_id) -> None:
        raise NotImplementedError


class AwsHarness(Harness):
    def _ec2(self, region):
        import boto3

        return boto3.client("ec2", region_name=region)

    def seed(self, place, n, tags, *, spot=True, instance_type=None, detailed=True):
        """`detailed`: EC2 detailed monitoring (60 s CPU datapoints, what set_utilization posts);
        False = basic monitoring, EC2's default (300 s)."""
        kwargs = {"Monitoring": {"Enabled": detailed}}
        if spot:
            kwargs["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
        resp = self._ec2(place).run_instances(
            ImageId=AMI,
            MinCount=n,
            MaxCount=n,
            InstanceType=instance_type or "g5.xlarge",
            TagSpecifications=spec,
            **kwargs,
        )
        return [i["InstanceId"] for i in resp["Instances"]]

    def stop(self, place, ids):
        self._ec2(place).stop_instances(InstanceIds=ids)

    def backend_state(self, place, instance_id):
        resp = self._ec2(place).describe_instances(InstanceIds=[instance_id])
        return resp["Reservations"][0]["Instances"][0]["State"]["Name"]

    def set_utilization(self, place, instance_id, gpu_pct, cpu_pct, minutes_ago=range(1, 60)):
        import boto3

        cw = boto3.client("cloudwatch", region_name=place)
        now = datetime.now(UTC)
        cpu = [
            {
                "MetricName": "CPUUtilization",
                "Dimensions": [{"Name": "InstanceId", "Value": instance_id}],
                "Timestamp": now - timedelta(minutes=m),
                "Value": cpu_pct,
                "Unit": "Percent",
            }
            for m in minutes_ago
        ]
        cw.put_metric_data(Namespace="AWS/EC2", MetricData=cpu)
        # The CloudWatch agent's nvidia_smi plugin: one series per GPU index.
        gpu = [
            {
                "MetricName": "nvidia_smi_utilization_gpu",
                "Dimensions": [
                    {"Name": "InstanceId", "Value": instance_id},
                    {"Name": "index", "Value": str(idx)},
                    {"Name": "name", "Value": "NVIDIA A10G"},
                ],
                "Timestamp": now - timedelta(minutes=m),
                "Value": gpu_pct if idx == 0 else 0.0,
            }
            for idx in (0, 1)
            for m in minutes_ago
        ]
        cw.put_metric_data(Namespace="CWAgent", MetricData=gpu)
        return True

    def preempt(self, place, instance_id):
        # moto has no spot interruptions; a reclaimed instance looks terminated from outside.
        self._ec2(place).terminate_instances(InstanceIds=[instance_id])


# Tags as GCP labels, written out here rather than by the product's encoder (the stand-in is
# seeded with these): a UTC timestamp `2026-11-30T08:00:00Z` is stored as `2026-11-30t08-00-00z`;
# every other key and value the tests use is a valid label already and is stored as it is.
def _hand_gcp_labels(tags: dict[str, str]) -> dict[str, str]:
    import re

    out = {}
    for k, v in tags.items():
        assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k), f"tag key {k!r} needs a hand-written label"
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", v):
            v = v[:10] + "t" + v[11:13] + "-" + v[14:16] + "-" + v[17:19] + "z"
        assert re.fullmatch(r"[a-z0-9_-]{0,63}", v), f"tag value {v!r} needs a hand-written label"
        out[k] = v
    return out


class GcpHarness(Harness):
    server: GceServer
    _names = itertools.count(1)

    def region_of(self, place):
        return place.rsplit("-", 1)[0]

    def seed(self, place, n, tags, *, spot=True, instance_type=None):
        labels = _hand_gcp_labels(tags or {})
        ids = []
        for _ in range(n):
            name = f"vm-{next(self._names)}"
            self.server.add_instance(
                GCP_PROJECT, place, name, labels=labels, spot=spot, machine_type=instance_type or "g2-standard-4"
            )
            ids.append(name)
        return ids

    def stop(self, place, ids):
        for name in ids:
            self.server.state.instances[(GCP_PROJECT, place, name)]["status"] = "TERMINATED"

    def backend_state(self, place, instance_id):
        inst = self.server.state.instances.get((GCP_PROJECT, place, instance_id))
        return inst["status"] if inst else None

    def set_utilization(self, place, instance_id, gpu_pct, cpu_pct, minutes_ago=range(1, 60)):
        inst = self.server.state.instances[(GCP_PROJECT, place, instance_id)]
        # Hypervisor CPU is a fraction; the Ops Agent's GPU metric is percent, one series per GPU.
        self.server.add_series(GCP_PROJECT, "compute.googleapis.com/instance/cpu/utilization", inst,
                               {m: cpu_pct / 100 for m in minutes_ago})
        for gpu, pct in ((0, gpu_pct), (1, 0.0)):
            self.server.add_series(GCP_PROJECT, "agent.googleapis.com/gpu/utilization", inst, {m: pct for m in minutes_ago},
                                   {"gpu_number": str(gpu), "model": "NVIDIA L4"})
        # An old sample outside the window must not count.
        self.server.add_series(GCP_PROJECT, "compute.googleapis.com/instance/cpu/utilization", inst, {600: 1.0})
        return True

    def preempt(self, place, instance_id):
        self.server.preempt(GCP_PROJECT, place, instance_id)


class FakeHarness(Harness):
    def seed(self, place, n, tags, *, spot=True, instance_type=None):
        return [
            self.provider.add_instance(place, tags=tags, spot=spot, instance_type=instance_type or "g5.xlarge")
            for _ in range(n)
        ]

    def stop(self, place, ids):
        for iid in ids:
            self.provider.stop_instance(place, iid)

    def backend_state(self, place, instance_id):
        return self.provider.instance_state(place, instance_id)

    def set_utilization(self, place, instance_id, gpu_pct, cpu_pct, minutes_ago=range(1, 60)):
        self.provider.set_utilization(instance_id, gpu_pct=gpu_pct, cpu_pct=cpu_pct)
        return True

    def preempt(self, place, instance_id):
        self.provider.preempt(instance_id)


@pytest.fixture(scope="session")
def gce_server():
    server = GceServer().start()
    yield server
    server.stop()


@pytest.fixture
def gce(gce_server):
    gce_server.reset()
    return gce_server


AWS_REGIONS = ("us-east-1", "us-west-2")


@pytest.fixture
def aws_clean(aws_env) -> str:
    """boto3 against moto in an account of this test's own (tests/conftest.py): listings without
    a filter see only what this test made, and metrics and objects start empty."""
    return aws_env


def make_aws(request) -> AwsHarness:
    request.getfixturevalue("aws_clean")
    from launcher.providers.aws import AwsProvider

    # page_size=5 (EC2's minimum) so listings of a few reservations cross page boundaries.
    # A session per test: its credentials are this test's own account.
    import boto3

    from tests.conftest import botocore_session

    # Credentials left unresolved: the provider's parallel region listing makes its clients from
    # this one session, which boto3 does not make thread-safe; the provider must serialize that.
    session = boto3.Session(botocore_session=botocore_session())
    provider = AwsProvider(
        regions=list(AWS_REGIONS), page_size=5, max_attempts=2, retry_mode="standard", session=session
    )  # fmt: skip
    return AwsHarness("aws", provider, AWS_REGIONS)


def make_gcp(request) -> GcpHarness:
    server = request.getfixturevalue("gce")
    from launcher.providers.gcp import GcpProvider

    provider = GcpProvider(
        GCP_PROJECT, api_endpoint=server.url, monitoring_endpoint=server.url, page_size=3,
        retry_initial_s=0.01, retry_timeout_s=5,
    )
    h = GcpHarness("gcp", provider, ("us-central1-a", "europe-west4-b"))
    h.server = server
    return h


def make_fake(request) -> FakeHarness:
    from launcher.providers.fake import FakeProvider

    return FakeHarness("fake", FakeProvider(regions=("us-east-1", "us-west-2")), ("us-east-1", "us-west-2"))


HARNESSES = {"aws": make_aws, "gcp": make_gcp, "fake": make_fake}


@pytest.fixture(params=sorted(HARNESSES))
def cloud(request) -> Harness:
    return HARNESSES[request.param](request)


@pytest.fixture(params=["aws", "gcp"])
def stack_cloud(request) -> Harness:
    """Only the clouds whose clusters are Pulumi stacks (the fake provisions in memory)."""
    return HARNESSES[request.param](request)


def no_signal(s: IdleSignals) -> bool:
    return s.gpu_utilization_pct is None and s.cpu_utilization_pct is None
