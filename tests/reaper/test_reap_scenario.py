"""The nightly-reap scenario against each provider's most faithful local backend: AWS (real
moto_server with CloudWatch metrics), GCP (real compute client against the local REST server),
and the fake. Exactly the right instances are marked, then terminated after the grace period
(clock injected); a dry run changes nothing; unmanaged, protected and busy ones are untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from launcher.ledger import ClusterRecord, Ledger, NewAttempt, RunRecord
from launcher.reaper.decide import MARK_TAG
from launcher.reaper.policy import ProjectPolicy, ReapPolicy
from launcher.reaper.runner import run_pass

MANAGED = {"managed-by": "gpu-launcher", "project": "vision", "owner": "ana", "experiment": "e1", "cost-center": "cc1"}


def _run(led: Ledger, run_id: str) -> None:
    led.create_run(RunRecord(run_id=run_id, name=run_id, spec_hash="h", spec_yaml="run: true", project="vision"))


def _cluster(led, cloud, name, run_id, region, iid):
    led.upsert_cluster(ClusterRecord(name=name, provider=cloud.provider.name, region=region, state="up", run_id=run_id, project="vision", nodes=[{"instance_id": iid, "rank": 0}]))


def test_nightly_scenario(cloud):
    now = datetime.now(UTC).replace(microsecond=0)
    a, b = cloud.places
    expired = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    idle = cloud.seed(a, 1, {**MANAGED, "cluster": "c-idle", "run-id": "r-idle"})[0]
    busy = cloud.seed(b, 1, {**MANAGED, "cluster": "c-busy", "run-id": "r-busy"})[0]
    protected = cloud.seed(a, 1, {**MANAGED, "keep-alive": "true", "expires-at": expired})[0]
    unmanaged = cloud.seed(a, 1, {"project": "vision"})[0]
    orphan = cloud.seed(b, 1, {**MANAGED, "cluster": "c-lost", "expires-at": expired})[0]
    gpu_busy_orphan = cloud.seed(b, 1, {**MANAGED, "cluster": "c-hot"})[0]
    has_metrics = cloud.set_utilization(a, idle, 0.0, 1.0)
    if has_metrics:
        cloud.set_utilization(b, busy, 2.0, 3.0)  # idle metrics, but the ledger says it runs
        cloud.set_utilization(a, protected, 0.0, 0.0)
        cloud.set_utilization(a, unmanaged, 0.0, 0.0)
        cloud.set_utilization(b, orphan, 0.0, 0.5)
        cloud.set_utilization(b, gpu_busy_orphan, 95.0, 30.0)

    policy = ReapPolicy(providers=[cloud.provider.name], defaults=ProjectPolicy(grace_minutes=60))
    providers = {cloud.provider.name: cloud.provider}
    with Ledger() as led:
        _run(led, "r-idle")
        _run(led, "r-busy")
        _cluster(led, cloud, "c-idle", "r-idle", cloud.region_of(a), idle)
        _cluster(led, cloud, "c-busy", "r-busy", cloud.region_of(b), busy)
        led.add_attempt("r-busy", NewAttempt(cloud=cloud.provider.name, region=cloud.region_of(b), instance_type="g5.xlarge", price_usd_per_hour=1.0, cluster="c-busy"))
        led.heartbeat(cluster="c-idle", at=now - timedelta(hours=2))  # executor went quiet
        led.heartbeat(cluster="c-busy", at=now - timedelta(minutes=1))

        # Dry run first: says what it would do, changes nothing anywhere.
        dry = {o.instance_id: o for o in run_pass(policy, providers, led, now=now, dry_run=True, sleep=lambda s: None).outcomes}
        assert dry[idle].decision == "mark"
        assert all(MARK_TAG not in i.tags for i in cloud.provider.list_instances())
        assert led.reap_audit() == []

        p1 = {o.instance_id: o for o in run_pass(policy, providers, led, now=now, sleep=lambda s: None).outcomes}
        assert unmanaged not in p1
        expected = {idle: "mark", orphan: "mark", busy: "keep", protected: "skip", gpu_busy_orphan: "keep"}
        assert {k: p1[k].decision for k in expected} == expected, {k: p1[k].reasons for k in expected}
        marked = {i.instance_id for i in cloud.provider.list_instances() if MARK_TAG in i.tags}
        assert marked == {idle, orphan}

        p2 = {o.instance_id: o for o in run_pass(policy, providers, led, now=now + timedelta(minutes=30), sleep=lambda s: None).outcomes}
        assert p2[idle].decision == "keep" and p2[orphan].decision == "keep"  # grace not over

        from launcher.reaper.service import _price_lookup

        p3 = {o.instance_id: o for o in run_pass(policy, providers, led, now=now + timedelta(minutes=61), sleep=lambda s: None, price_lookup=_price_lookup).outcomes}
        assert p3[idle].decision == "act" and p3[idle].ok, p3[idle].error
        assert p3[orphan].decision == "act" and p3[orphan].ok, p3[orphan].error

        gone = {"terminated", "TERMINATED", "STOPPING", "shutting-down", None}
        assert cloud.backend_state(a, idle) in gone
        assert cloud.backend_state(b, orphan) in gone
        for keep_place, keep_id in ((b, busy), (a, protected), (a, unmanaged), (b, gpu_busy_orphan)):
            assert cloud.backend_state(keep_place, keep_id) in ("running", "RUNNING"), keep_id
        assert led.get_cluster("c-idle").state == "terminated"
        acts = [r for r in led.reap_audit() if r.decision == "act"]
        assert {r.instance_id for r in acts} == {idle, orphan}
        if cloud.provider.name in ("aws", "gcp"):  # priced from the catalog snapshot
            from tests.pricing.helpers import snapshot_hourly_price

            seeded_type = {"aws": "g5.xlarge", "gcp": "g2-standard-4"}[cloud.provider.name]  # the harness default
            for r in acts:
                want = snapshot_hourly_price(cloud.provider.name, r.region, seeded_type, spot=True)
                assert want is not None and r.hourly_price_usd == pytest.approx(want, abs=1e-9)
                # a day avoided, or less when expires-at comes sooner (the orphan's is past)
                assert r.estimated_saving_usd == pytest.approx(r.hourly_price_usd * 24, rel=1e-3)


@pytest.mark.parametrize("cloud", ["aws", "gcp"], indirect=True)
def test_metrics_covering_part_of_the_window_are_not_idle_evidence(cloud):
    """An instance with only the last 3 minutes of (idle) metrics is younger than the window as
    far as anyone can tell: kept, and the reason says how much of the window was covered."""
    a, _ = cloud.places
    young = cloud.seed(a, 1, {**MANAGED, "cluster": "c-young"})[0]
    assert cloud.set_utilization(a, young, 0.0, 0.0, minutes_ago=(1, 2, 3))
    policy = ReapPolicy(providers=[cloud.provider.name], defaults=ProjectPolicy(grace_minutes=0))
    with Ledger() as led:
        out = {o.instance_id: o for o in run_pass(policy, {cloud.provider.name: cloud.provider}, led, sleep=lambda s: None).outcomes}
    assert out[young].decision == "keep", out[young].reasons
    cpu = next(r for r in out[young].reasons if r.startswith("cpu-utilization: "))
    assert "3.0 of the 60 min window" in cpu and "too little history" in cpu, cpu
