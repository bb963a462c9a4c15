"""Events, clusters, heartbeats and the reaper's audit log."""

from __future__ import annotations

from datetime import timedelta

import pytest

from launcher.errors import BadInputError, NotFoundError
from launcher.ledger import ClusterRecord, ClusterState, EventKind, Ledger, ReapAuditRecord
from tests.ledger.conftest import T0
from tests.ledger.helpers import gpu_attempt, make_run


def test_events_order_filter_and_tail(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-ev"))
    a = ledger.add_attempt("r-ev", gpu_attempt())
    e1 = ledger.add_event("r-ev", EventKind.CHECKPOINT, {"step": 100, "at": T0}, attempt_id=a.attempt_id)
    clock.advance(seconds=3)
    e2 = ledger.add_event("r-ev", EventKind.PREEMPTION, {"notice_s": 120}, attempt_id=a.attempt_id)
    e3 = ledger.add_event("r-ev", EventKind.RECOVERY)
    got = ledger.events("r-ev")
    assert [e.id for e in got] == [e1.id, e2.id, e3.id] and e1.id < e2.id < e3.id
    assert got[0].data == {"step": 100, "at": str(T0)}  # odd values stored as text, not lost
    assert got[1].at == T0 + timedelta(seconds=3) and got[1].attempt_id == a.attempt_id
    assert got[2].data == {} and got[2].attempt_id is None
    assert [e.kind for e in ledger.events("r-ev", kind=[EventKind.PREEMPTION, EventKind.RECOVERY])] == [
        "preemption", "recovery",
    ]  # fmt: skip
    assert [e.id for e in ledger.events("r-ev", after_id=e1.id)] == [e2.id, e3.id]
    with pytest.raises(NotFoundError):
        ledger.add_event("r-none", EventKind.LOG, {"line": "x"})



def test_recent_events_of_one_kind_across_runs_newest_first(ledger: Ledger, clock) -> None:
    for r in ("r-a", "r-b"):
        ledger.create_run(make_run(r))
    old = ledger.add_event("r-a", "outage", {"down_hours": 1.0})
    clock.advance(hours=2)
    ledger.add_event("r-a", EventKind.LOG, {"line": "x"})
    b = ledger.add_event("r-b", "outage", {"down_hours": 2.0})
    c = ledger.add_event("r-a", "outage", {"down_hours": 3.0})  # same instant as b: later id first
    assert [e.id for e in ledger.recent_events("outage", since=T0)] == [c.id, b.id, old.id]
    assert [e.id for e in ledger.recent_events("outage", since=T0 + timedelta(hours=1))] == [c.id, b.id]
    assert [e.run_id for e in ledger.recent_events("outage", since=T0, limit=1)] == ["r-a"]
    assert ledger.recent_events("preemption", since=T0) == []

def test_cluster_upsert_keeps_created_and_sets_terminated(ledger: Ledger, clock) -> None:
    nodes = [{"instance_id": "i-1", "ip": "10.0.0.1", "rank": 0}]
    c = ledger.upsert_cluster(
        ClusterRecord(name="vision-c1", provider="aws", region="us-east-1", stack="vision-c1",
                      run_id="r-1", project="vision", nodes=nodes, tags={"project": "vision"})
    )  # fmt: skip
    assert c.created_at == T0 and c.state == ClusterState.PROVISIONING and c.nodes == nodes
    clock.advance(minutes=5)
    up = ledger.upsert_cluster(
        ClusterRecord(name="vision-c1", provider="aws", region="us-east-1", state=ClusterState.UP,
                      run_id="r-1", nodes=nodes, tags={"owner": "ada"})
    )  # fmt: skip
    assert up.created_at == T0 and up.updated_at == T0 + timedelta(minutes=5)
    assert up.tags == {"project": "vision", "owner": "ada"} and up.terminated_at is None
    clock.advance(minutes=5)
    gone = ledger.set_cluster_state("vision-c1", ClusterState.TERMINATED)
    assert gone.terminated_at == T0 + timedelta(minutes=10) and gone.tags == up.tags
    clock.advance(minutes=5)  # terminating again keeps the first time (idempotent teardown)
    assert ledger.set_cluster_state("vision-c1", ClusterState.TERMINATED).terminated_at == gone.terminated_at
    with pytest.raises(NotFoundError):
        ledger.get_cluster("nope")


def test_clusters_listing_filters(ledger: Ledger, clock) -> None:
    ledger.upsert_cluster(ClusterRecord(name="a", provider="aws", state=ClusterState.UP, run_id="r-1"))
    clock.advance(seconds=1)
    ledger.upsert_cluster(ClusterRecord(name="b", provider="local", state=ClusterState.UP))
    clock.advance(seconds=1)
    ledger.upsert_cluster(ClusterRecord(name="c", provider="aws", state=ClusterState.TERMINATED))
    assert [c.name for c in ledger.clusters()] == ["a", "b", "c"]
    assert [c.name for c in ledger.clusters(state=ClusterState.UP)] == ["a", "b"]
    assert [c.name for c in ledger.clusters(provider="aws", state=["up", "stopped"])] == ["a"]
    assert [c.name for c in ledger.clusters(run_id="r-1")] == ["a"]


def test_heartbeats_keep_latest(ledger: Ledger, clock) -> None:
    assert ledger.last_heartbeat(run_id="r-hb") is None
    ledger.heartbeat(run_id="r-hb", cluster="c-hb")
    clock.advance(seconds=30)
    ledger.heartbeat(cluster="c-hb")
    assert ledger.last_heartbeat(run_id="r-hb") == T0
    assert ledger.last_heartbeat(cluster="c-hb") == T0 + timedelta(seconds=30)
    with pytest.raises(BadInputError):
        ledger.heartbeat()
    with pytest.raises(BadInputError):
        ledger.last_heartbeat(run_id="r-hb", cluster="c-hb")


def test_reap_audit_append_and_query(ledger: Ledger, clock) -> None:
    first = ledger.record_reap(
        ReapAuditRecord(provider="aws", region="us-east-1", instance_id="i-1", decision="mark",
                        action="tag-mark", reasons=["gpu 0% over 60 min"], hourly_price_usd=1.2,
                        pass_id="p1")
    )  # fmt: skip
    clock.advance(hours=2)
    ledger.record_reap(
        ReapAuditRecord(provider="aws", region="us-east-1", instance_id="i-1", decision="act",
                        action="destroy", reasons=["grace passed"], hourly_price_usd=1.2,
                        estimated_saving_usd=28.8, pass_id="p2")
    )  # fmt: skip
    ledger.record_reap(
        ReapAuditRecord(provider="gcp", region="us-central1", instance_id="vm-2", decision="act",
                        action="destroy", ok=False, error="503 backend error", pass_id="p2")
    )  # fmt: skip
    assert first.id is not None and first.at == T0
    i1 = ledger.reap_audit(instance_id="i-1")
    assert [(r.decision, r.action, r.at) for r in i1] == [("mark", "tag-mark", T0), ("act", "destroy", T0 + timedelta(hours=2))]
    assert i1[1].estimated_saving_usd == 28.8 and i1[0].reasons == ["gpu 0% over 60 min"]
    failed = ledger.reap_audit(provider="gcp")
    assert len(failed) == 1 and failed[0].ok is False and failed[0].error == "503 backend error"
    assert len(ledger.reap_audit(pass_id="p2")) == 2
    assert [r.instance_id for r in ledger.reap_audit(since=T0 + timedelta(hours=1))] == ["i-1", "vm-2"]
    assert [r.instance_id for r in ledger.reap_audit(limit=1)] == ["vm-2"]
