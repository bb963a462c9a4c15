"""The reaper on monitoring data shaped as the clouds deliver it, through the real clients:
a real moto_server (CloudWatch basic 5-minute statistic sets, detailed 1-minute points, the
agent's GPU series at 60 s and 300 s, late delivery, gaps, a spike) and the local Cloud
Monitoring stand-in (60 s alignment by ALIGN_MEAN / ALIGN_MAX). Instances are two days old by
the cloud's own launch time (see conftest.py) unless a test launches a fresh one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from launcher.ledger import Ledger
from launcher.reaper.policy import ProjectPolicy, ReapPolicy
from launcher.reaper.runner import run_pass
from tests.reaper.monitoring_shapes import put_agent_gpu, put_ec2_cpu, starts

MANAGED = {"managed-by": "gpu-launcher", "project": "vision", "owner": "ana", "experiment": "e1", "cost-center": "cc1"}
POLICY = ReapPolicy(providers=["aws"], defaults=ProjectPolicy(grace_minutes=60))  # 60-min window, GPU 5%, CPU 10%


def _reason(outcome, prefix: str) -> str:
    return next(r for r in outcome.reasons if r.startswith(prefix))


def _pass(provider, policy=POLICY):
    with Ledger() as led:
        return {o.instance_id: o for o in run_pass(policy, {provider.name: provider}, led, dry_run=True, sleep=lambda s: None).outcomes}


@pytest.mark.parametrize("cloud", ["aws"], indirect=True)
def test_cloudwatch_shapes(cloud, moto_clock):
    import boto3

    region = cloud.places[0]
    cw = boto3.client("cloudwatch", region_name=region)
    now = datetime.now(UTC)

    def seed(name: str, **kw) -> str:
        return cloud.seed(region, 1, {**MANAGED, "cluster": f"c-{name}"}, **kw)[0]

    basic = seed("basic", detailed=False)  # the g5.xlarge: everything every 5 minutes
    put_ec2_cpu(cw, basic, now, 0.5)
    put_agent_gpu(cw, basic, now, 0.5, interval_s=300)

    detailed = seed("detailed", detailed=True)
    put_ec2_cpu(cw, detailed, now, 0.5, basic=False)
    put_agent_gpu(cw, detailed, now, 0.5, interval_s=60)

    mixed = seed("mixed", detailed=False)  # basic CPU, agent GPU at 60 s
    put_ec2_cpu(cw, mixed, now, 0.5)
    put_agent_gpu(cw, mixed, now, 0.5, interval_s=60)

    late = seed("late", detailed=False)  # CloudWatch 10 minutes behind
    put_ec2_cpu(cw, late, now, 0.5, delay_min=10)
    put_agent_gpu(cw, late, now, 0.5, interval_s=300, delay_min=10)

    gap = seed("gap", detailed=False)  # nothing delivered from 45 to 20 minutes ago
    put_ec2_cpu(cw, gap, now, 0.5, gap=(45, 20))
    put_agent_gpu(cw, gap, now, 0.5, interval_s=300, gap=(45, 20))

    one_lost = seed("one-lost", detailed=False)  # one 5-minute point lost: within the tolerance
    # Five minutes wide, so exactly one grid point falls in it whatever the minute (four would
    # miss the grid one time in five).
    kept = put_ec2_cpu(cw, one_lost, now, 0.5, gap=(32, 27))
    assert len(starts(now, 300)) - len(kept) == 1
    put_agent_gpu(cw, one_lost, now, 0.5, interval_s=300)

    spike = seed("spike", detailed=False)  # idle on average, 85% for a moment 30 minutes ago
    put_ec2_cpu(cw, spike, now, 0.5, spike=(30, 85.0))
    put_agent_gpu(cw, spike, now, 0.5, interval_s=300)

    with moto_clock.launched_now():  # launched seconds ago, whatever its created-at tag says
        young = cloud.seed(region, 1, {**MANAGED, "cluster": "c-young", "created-at": (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")}, detailed=False)[0]
    put_ec2_cpu(cw, young, now, 0.5)  # as if it had a history: the launch time says it cannot
    put_agent_gpu(cw, young, now, 0.5, interval_s=300)

    out = _pass(cloud.provider)
    expected = {basic: "mark", detailed: "mark", mixed: "mark", late: "mark", one_lost: "mark", gap: "keep", spike: "keep", young: "keep"}
    assert {k: out[k].decision for k in expected} == expected, {k: out[k].reasons for k in expected}

    for iid in (basic, detailed, mixed):
        for prefix, label in (("gpu-utilization: ", "GPU"), ("cpu-utilization: ", "CPU")):
            assert _reason(out[iid], prefix).startswith(f"{prefix}{label} 0.5% over the last 60 min"), out[iid].reasons
    # The report: 5-minute points are not "12 of the 60 min window" any more.
    assert "of the 60 min window" not in " ".join(out[basic].reasons)

    for prefix in ("gpu-utilization: ", "cpu-utilization: "):
        text = _reason(out[late], prefix)
        assert "not delivered yet (late, not counted)" in text and "over the 60 min to" in text, text
        gap_text = _reason(out[gap], prefix)
        assert "no data" in gap_text and "unknown, not idle" in gap_text and "too little history" in gap_text, gap_text
    # The missing minutes are named: the gap starts 45 minutes ago, on the 5-minute grid (so up to
    # 5 minutes either side, which may fall in the previous hour).
    lost_from = _reason(out[gap], "cpu-utilization: ").split("no data ")[1][:5]
    assert lost_from in {(now - timedelta(minutes=m)).strftime("%H:%M") for m in range(40, 51)}, out[gap].reasons
    assert "no data" in _reason(out[one_lost], "cpu-utilization: ")

    spike_cpu = _reason(out[spike], "cpu-utilization: ")
    assert "peak 85.0%" in spike_cpu and "busy" in out[spike].reasons, out[spike].reasons

    young_cpu = _reason(out[young], "cpu-utilization: ")
    assert "younger than the window" in young_cpu, young_cpu
    age = _reason(out[young], "age: ")
    assert "the created-at tag says" in age and "never the tag" in age, age
    assert "the created-at tag" not in _reason(out[basic], "age: ")  # no tag, nothing to disagree with


@pytest.mark.parametrize("cloud", ["gcp"], indirect=True)
def test_cloud_monitoring_shapes(cloud):
    """GCE's hypervisor CPU (a fraction) and the Ops Agent's GPU, sampled every 60 s (every 30 s
    for the spike), aligned by the stand-in as Cloud Monitoring does; instances created on
    2026-11-30 by their creationTimestamp."""
    zone = cloud.places[0]
    server = cloud.server

    def seed(name: str, minutes: list[float], cpu: dict[float, float] | None = None) -> str:
        iid = cloud.seed(zone, 1, {**MANAGED, "cluster": f"c-{name}"})[0]
        inst = server.state.instances[("test-proj", zone, iid)]
        server.add_series("test-proj", "compute.googleapis.com/instance/cpu/utilization", inst, cpu or {m: 0.005 for m in minutes})
        server.add_series("test-proj", "agent.googleapis.com/gpu/utilization", inst, {m: 0.5 for m in minutes}, {"gpu_number": "0"})
        return iid

    full = [m + 0.25 for m in range(0, 100)]
    idle = seed("idle", full)
    late = seed("late", [m for m in full if m >= 10])  # Cloud Monitoring 10 minutes behind
    gap = seed("gap", [m for m in full if not 20 <= m < 45])
    spiky = {m / 2: (0.6 if m == 61 else 0.005) for m in range(0, 200)}  # one 30 s sample at 60% CPU
    spike = seed("spike", full, cpu=spiky)
    out = _pass(cloud.provider, ReapPolicy(providers=["gcp"], defaults=ProjectPolicy(grace_minutes=60)))
    expected = {idle: "mark", late: "mark", gap: "keep", spike: "keep"}
    assert {k: out[k].decision for k in expected} == expected, {k: out[k].reasons for k in expected}
    assert _reason(out[idle], "cpu-utilization: ").startswith("cpu-utilization: CPU 0.5% over the last 60 min")
    assert "not delivered yet" in _reason(out[late], "gpu-utilization: ")
    assert "no data" in _reason(out[gap], "gpu-utilization: ")
    assert "peak" in _reason(out[spike], "cpu-utilization: ") and "busy" in out[spike].reasons


@pytest.mark.parametrize("cloud", ["aws"], indirect=True)
def test_throttled_monitoring_is_unknown_for_its_instances_and_the_pass_goes_on(cloud, monkeypatch):
    """us-west-2's CloudWatch throttles every call: botocore's bounded retries, then those
    instances are unknown (kept, the reason says why); us-east-1's are judged as usual."""
    import boto3

    from launcher.providers.aws import AwsProvider
    from tests.conftest import botocore_session
    from tests.providers.throttle_proxy import ThrottleProxy

    east, west = cloud.places
    now = datetime.now(UTC)
    ids = {}
    for region in (east, west):
        iid = cloud.seed(region, 1, {**MANAGED, "cluster": f"c-{region}"}, detailed=False)[0]
        cw = boto3.client("cloudwatch", region_name=region)
        put_ec2_cpu(cw, iid, now, 0.5)
        put_agent_gpu(cw, iid, now, 0.5, interval_s=300)
        ids[region] = iid
    upstream = boto3.client("cloudwatch", region_name=east).meta.endpoint_url
    proxy = ThrottleProxy(upstream, only=lambda h: f"/{west}/" in h.get("Authorization", ""))
    proxy.throttle_next = 1_000
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", proxy.url)
        provider = AwsProvider(regions=[east, west], max_attempts=3, retry_mode="standard",
                               session=boto3.Session(botocore_session=botocore_session()))
        out = _pass(provider)
    finally:
        proxy.stop()
    assert out[ids[east]].decision == "mark", out[ids[east]].reasons
    kept = out[ids[west]]
    assert kept.decision == "keep", kept.reasons
    assert any(r.startswith("signals unavailable: ") and "Throttling" in r for r in kept.reasons), kept.reasons
    assert "cpu-utilization: CPU utilization unknown: the metrics could not be read" in kept.reasons
    # Bounded: one call's worth of botocore attempts, not retries of retries.
    assert proxy.throttled == provider.max_attempts, proxy.throttled


def test_a_partial_cloudwatch_answer_is_unknown_for_that_instance_only():
    """GetMetricData answers per query; one that ends `PartialData` without a next page (or
    `InternalError`) leaves that instance unknown, never a guess from what did arrive. The real
    client's own response validation (botocore's Stubber) shapes the answer."""
    import boto3
    from botocore.stub import Stubber

    from launcher.providers.aws import AwsProvider
    from launcher.providers.base import InstanceInfo

    now = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)
    provider = AwsProvider(regions=["us-east-1"], clock=lambda: now,
                           session=boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"))
    insts = [InstanceInfo("aws", "us-east-1", None, iid, "g5.xlarge", "running", False, dict(MANAGED), now - timedelta(days=2), None, 300)
             for iid in ("i-complete", "i-partial")]
    points = [now.replace(second=0) - timedelta(minutes=5 * k) for k in range(1, 16)]
    full = {"Timestamps": points, "Values": [0.5] * len(points), "StatusCode": "Complete"}
    cw = provider.client("cloudwatch", "us-east-1")
    with Stubber(cw) as stub:
        stub.add_response("list_metrics", {"Metrics": []})
        stub.add_response("get_metric_data", {"MetricDataResults": [
            {"Id": "c0a", **full}, {"Id": "c0m", **full},
            {"Id": "c1a", "Timestamps": points[:3], "Values": [0.5] * 3, "StatusCode": "PartialData"},
            {"Id": "c1m", "Timestamps": points[:3], "Values": [0.5] * 3, "StatusCode": "PartialData"},
        ]})
        got = provider.idle_signals_many(insts, 60)
        stub.assert_no_pending_responses()
    assert got["i-complete"].error is None and got["i-complete"].cpu_utilization_pct == pytest.approx(0.5)
    assert got["i-complete"].cpu_covered_minutes == pytest.approx(60)
    assert got["i-partial"].error == "CloudWatch answered PartialData for CPUUtilization"
    assert got["i-partial"].cpu_utilization_pct is None
