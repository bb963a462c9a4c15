"""Failures the controller and reaper must survive: throttling (retried with backoff), API errors
(one ProviderError, no partial garbage), spot reclaims seen from outside the instance."""

from __future__ import annotations

import pytest

from launcher.errors import ProviderError
from launcher.providers import registry
from launcher.providers.base import MANAGED_BY_TAG, MANAGED_BY_VALUE
from launcher.providers.fake import FakeProvider
from tests.providers.conftest import GCP_PROJECT

MANAGED = {MANAGED_BY_TAG: MANAGED_BY_VALUE, "project": "f"}


# ---- gcp: the real client against the local server, with injected HTTP errors ----------------
@pytest.fixture
def gcp(gce):
    from launcher.providers.gcp import GcpProvider

    return GcpProvider(GCP_PROJECT, api_endpoint=gce.url, page_size=2, retry_initial_s=0.01, retry_timeout_s=2)


def _seed_gcp(gce, n, zone="us-central1-a", **kw):
    return [gce.add_instance(GCP_PROJECT, zone, f"f-{i}", labels=MANAGED, **kw)["name"] for i in range(n)]


def test_gcp_throttled_listing_is_retried(gce, gcp):
    _seed_gcp(gce, 5)
    gce.fail_next("GET", 429, times=2, path_contains="aggregated")
    assert len(gcp.list_instances()) == 5
    listed = [p for m, p in gce.state.requests if "aggregated" in p]
    # Two throttled attempts, then the three pages (page size 2) of the real listing.
    assert len(listed) == 2 + 3


def test_gcp_persistent_server_error_is_one_provider_error(gce, gcp):
    _seed_gcp(gce, 1)
    gce.fail_next("GET", 503, times=1000)
    with pytest.raises(ProviderError, match="retry deadline|503"):
        gcp.list_instances()


def test_gcp_delete_waits_for_the_zone_operation(gce, gcp):
    (name,) = _seed_gcp(gce, 1)
    gce.state.polls_until_done = 2  # the operation reports RUNNING twice before DONE
    gcp.terminate_instance("us-central1-a", name)
    assert ("us-central1-a", name) not in {(z, n) for (_, z, n) in gce.state.instances}
    paths = [p for m, p in gce.state.requests]
    assert any(p.endswith("/wait") for p in paths)


def test_gcp_delete_error_on_api_is_provider_error_and_instance_stays(gce, gcp):
    (name,) = _seed_gcp(gce, 1)
    gce.fail_next("DELETE", 403)
    with pytest.raises(ProviderError, match="403"):
        gcp.terminate_instance("us-central1-a", name)
    assert gcp.instance_state("us-central1-a", name) == "running"


def test_gcp_preemption_seen_through_zone_operations(gce, gcp):
    victim, other = _seed_gcp(gce, 2)
    gce.preempt(GCP_PROJECT, "us-central1-a", victim)
    assert gcp.was_preempted("us-central1-a", victim) is True
    assert gcp.was_preempted("us-central1-a", other) is False


def test_gcp_clients_are_made_once_when_two_threads_ask_at_once(gce, gcp, monkeypatch):
    # A move's launch runs on a thread of its own while the watch asks about the running cluster.
    import threading
    import time

    from google.cloud import compute_v1

    made = []

    class SlowToMake(compute_v1.InstancesClient):
        def __init__(self, **kw):
            made.append(threading.get_ident())
            time.sleep(0.3)  # a credentials lookup; the other thread asks meanwhile
            super().__init__(**kw)

    monkeypatch.setattr(compute_v1, "InstancesClient", SlowToMake)
    _seed_gcp(gce, 3)
    start, got = threading.Barrier(3), []

    def ask():
        start.wait(timeout=10)
        got.append(gcp.instances_client())

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(made) == 1 and len(got) == 3 and all(c is got[0] for c in got)
    assert len(gcp.list_instances()) == 3  # and the one client is the provider's, working


def test_gcp_mark_survives_a_concurrent_label_change(gce, gcp):
    (name,) = _seed_gcp(gce, 1)
    real_handle = gce.handle
    raced = []

    def racing_handle(method, path, body):
        # Someone else changes the labels between our get and our setLabels, once.
        if path.endswith("/setLabels") and not raced:
            raced.append(1)
            inst = gce.state.instances[(GCP_PROJECT, "us-central1-a", name)]
            inst["labels"]["owner"] = "bob"
            inst["labelFingerprint"] = "changed"
        return real_handle(method, path, body)

    gce.handle = racing_handle
    try:
        gcp.tag_instance("us-central1-a", name, {"reaper-mark": "idle"})
    finally:
        gce.handle = real_handle
    labels = gce.state.instances[(GCP_PROJECT, "us-central1-a", name)]["labels"]
    assert labels["reaper-mark"] == "idle" and labels["owner"] == "bob"


def test_gcp_unknown_filter_syntax_is_rejected_by_the_server(gce):
    # Guards the test server itself: a filter it cannot parse must fail, not match everything.
    from google.api_core.exceptions import BadRequest
    from google.cloud import compute_v1

    client = compute_v1.InstancesClient(**__import__("launcher.providers.gcp", fromlist=["x"]).GcpProvider(
        GCP_PROJECT, api_endpoint=gce.url)._client_kwargs())
    req = compute_v1.AggregatedListInstancesRequest(project=GCP_PROJECT, filter="labels.a ~ (b")
    with pytest.raises(BadRequest):
        list(client.aggregated_list(request=req))


# ---- fake: injected failures behave like the real providers' ---------------------------------
def test_fake_throttle_is_absorbed_up_to_max_retries_then_raises():
    fake = FakeProvider(max_retries=3)
    fake.add_instance("us-east-1", tags=MANAGED)
    fake.throttle("list_instances", times=3)
    assert len(fake.list_instances()) == 1  # 3 throttles < 4 attempts
    assert fake.throttled_calls == 3
    fake.throttle("list_instances", times=5)
    with pytest.raises(ProviderError, match="throttled"):
        fake.list_instances()  # 4 attempts throttled
    assert len(fake.list_instances()) == 1  # the 5th throttle is absorbed by the next call


def test_fake_api_error_on_terminate_leaves_the_instance():
    fake = FakeProvider()
    iid = fake.add_instance("us-east-1", tags=MANAGED)
    fake.fail_next("terminate_instance", times=1)
    with pytest.raises(ProviderError):
        fake.terminate_instance("us-east-1", iid)
    assert fake.instance_state("us-east-1", iid) == "running"
    fake.terminate_instance("us-east-1", iid)
    assert fake.instance_state("us-east-1", iid) == "terminated"


def test_fake_preempt_only_spot_and_reports_it():
    fake = FakeProvider()
    spot = fake.add_instance("us-east-1", tags=MANAGED, spot=True)
    ondemand = fake.add_instance("us-east-1", tags=MANAGED, spot=False)
    fake.preempt(spot)
    assert fake.was_preempted("us-east-1", spot) and not fake.was_preempted("us-east-1", ondemand)
    with pytest.raises(ValueError, match="on-demand"):
        fake.preempt(ondemand)


def test_fake_provision_tags_every_node_and_terminate_removes_them():
    from launcher.providers.base import ClusterRequest
    from pricing.models import Offer

    fake = FakeProvider()
    offer = Offer("fake", "us-west-2", "us-west-2b", "g5.12xlarge", "A10G", 4, 48, 192, 96, True, 1.5)
    handle = fake.provision(ClusterRequest("c1", offer, 2, {"project": "p", "run-id": "r1"}))
    listed = fake.list_instances({"run-id": "r1"})
    assert {n.instance_id for n in handle.nodes} == {i.instance_id for i in listed}
    assert [n.rank for n in handle.nodes] == [0, 1] and all(n.ip for n in handle.nodes)
    assert all(i.tags["cluster"] == "c1" and i.spot and i.instance_type == "g5.12xlarge" for i in listed)
    fake.terminate(handle)
    fake.terminate(handle)
    assert fake.list_instances({"run-id": "r1"}) == []


# ---- aws: throttling and errors -------------------------------------------------------------
@pytest.fixture
def throttling_moto(aws_env):
    from tests.providers.throttle_proxy import ThrottleProxy

    proxy = ThrottleProxy(aws_env)
    yield proxy
    proxy.stop()


def test_aws_throttling_is_retried_by_botocore(throttling_moto):
    import boto3

    from launcher.providers.aws import AwsProvider

    boto3.client("ec2", region_name="us-east-1").run_instances(
        ImageId="ami-12c6146b", MinCount=2, MaxCount=2,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in MANAGED.items()]}],
    )
    p = AwsProvider(regions=["us-east-1"], endpoint_url=throttling_moto.url, retry_mode="standard", max_attempts=3)
    throttling_moto.throttle_next = 1
    assert len(p.list_instances()) == 2
    assert throttling_moto.throttled == 1

    # Backoff sleeps are botocore's own (random, up to 2^n s); keep the failing case to 2 attempts.
    p2 = AwsProvider(regions=["us-east-1"], endpoint_url=throttling_moto.url, retry_mode="standard", max_attempts=2)
    throttling_moto.throttle_next = 100
    with pytest.raises(ProviderError, match="RequestLimitExceeded"):
        p2.list_instances()
    assert throttling_moto.throttled == 1 + 2  # both attempts were throttled


def test_aws_a_failing_region_is_reported_not_hidden(throttling_moto):
    import boto3

    from launcher.providers.aws import AwsProvider

    boto3.client("ec2", region_name="us-west-2").run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in MANAGED.items()]}],
    )
    p = AwsProvider(regions=["us-east-1", "us-west-2"], endpoint_url=throttling_moto.url, retry_mode="standard",
                    max_attempts=1, max_workers=1)  # one worker: us-east-1 is asked first and throttled
    throttling_moto.throttle_next = 1
    found, errors = p.list_instances_partial()
    assert [i.region for i in found] == ["us-west-2"]
    assert list(errors) == ["us-east-1"] and "RequestLimitExceeded" in errors["us-east-1"]
    throttling_moto.throttle_next = 1
    with pytest.raises(ProviderError, match="1 region"):
        p.list_instances()


def test_aws_unreachable_endpoint_is_one_provider_error(monkeypatch):
    from tests.conftest import free_port

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    from launcher.providers.aws import AwsProvider

    p = AwsProvider(regions=["us-east-1"], endpoint_url=f"http://127.0.0.1:{free_port()}", max_attempts=1)
    with pytest.raises(ProviderError, match="AWS call failed"):
        p.list_instances()


def test_registry_knows_the_cloud_providers():
    assert {"aws", "gcp", "fake"} <= set(registry.names())  # tests/conftest.py registers the fake
    assert registry.get("fake").name == "fake"


def test_production_registry_and_reaper_do_not_list_the_fake(tmp_path):
    """In a fresh interpreter (no test conftest) the fake is unknown to the registry and the reaper."""
    import subprocess
    import sys

    code = (
        "from launcher.providers import registry\n"
        "from launcher.reaper.policy import ReapPolicy\n"
        "print(sorted(registry.names()))\n"
        "try:\n"
        "    ReapPolicy(providers=['fake'])\n"
        "    print('accepted')\n"
        "except Exception as e:\n"
        "    print('refused', type(e).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['aws', 'gcp', 'kubernetes', 'local', 'slurm', 'ssh']", "refused ValidationError"]


def test_aws_idle_signals_batch_across_several_get_metric_data_calls(aws_env):
    from launcher.providers.aws import AwsProvider
    from tests.providers.conftest import AwsHarness

    p = AwsProvider(regions=["us-east-1"])
    p.max_queries_per_call = 2  # force several GetMetricData calls (500 in production)
    h = AwsHarness("aws", p, ("us-east-1", "us-west-2"))
    iids = h.seed("us-east-1", 3, MANAGED)
    for n, iid in enumerate(iids):
        h.set_utilization("us-east-1", iid, 10.0 * (n + 1), 5.0 * (n + 1))
    got = p.idle_signals_many(p.list_instances(), 60)
    assert {iid: (s.gpu_utilization_pct, s.cpu_utilization_pct) for iid, s in got.items()} == {
        iid: (pytest.approx(10.0 * (n + 1)), pytest.approx(5.0 * (n + 1))) for n, iid in enumerate(iids)
    }
