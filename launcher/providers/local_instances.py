"""What the reaper sees of the local backend.

A local cluster that the ledger records as up, and whose job processes are alive, is one
"instance" (this machine). Its idle signal is the CPU used by the job's process groups, per core
its ranks can use, averaged since the job started (a job younger than the reaper's window is
never called idle) and never below what a short sample sees now; the mark lives in the cluster's tags in the ledger; acting on it goes
through the `stop_cluster` the provider was given (the CLI gives it `launcher down`: the run's
controller stops the job cleanly, or the job is cleaned up when the controller is gone).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from launcher.procfs import group_cpu, run_process_groups
from launcher.ledger.interfaces import LedgerReader, LedgerWriter
from launcher.ledger.records import ClusterState
from launcher.providers.base import IdleSignals, InstanceInfo

LOCAL_REGION = "local"
LIVE_CLUSTER_STATES = (ClusterState.UP, ClusterState.PROVISIONING)


def _node_ids(cluster) -> list[str]:
    ids = [n.get("instance_id") for n in cluster.nodes if n.get("instance_id")]
    return ids or [f"{cluster.name}-n0"]


def list_local_instances(ledger: LedgerReader, tag_filter: dict[str, str] | None, *, instance_type: str) -> list[InstanceInfo]:
    out = []
    for c in ledger.clusters(provider="local", state=LIVE_CLUSTER_STATES):
        if any(c.tags.get(k) != v for k, v in (tag_filter or {}).items()):
            continue
        if not c.run_id or not run_process_groups(c.run_id):
            continue  # nothing running: not an instance (the reaper's stale-cluster check cleans it)
        out.append(
            InstanceInfo(
                provider="local", region=LOCAL_REGION, zone=None, instance_id=_node_ids(c)[0],
                instance_type=instance_type, state="running", spot=False, tags=dict(c.tags),
                launched_at=c.created_at, hourly_price_usd=0.0,
            )
        )  # fmt: skip
    return out


def cluster_of(ledger: LedgerReader, instance_id: str):
    for c in ledger.clusters(provider="local"):
        if instance_id in _node_ids(c):
            return c
    return None


def _per_core(pct_of_one_core: float, ranks: int) -> float:
    return min(100.0, pct_of_one_core / max(1, min(ranks, os.cpu_count() or 1)))


def local_idle_signals(ledger: LedgerReader, instance: InstanceInfo, window_minutes: int, *, sample_s: float = 1.0, extra_age_s: float = 0.0) -> IdleSignals:
    """There is no metrics history here: the figure is the job's average since it started (which
    covers the window only once the job is as old as it) or the current sample, whichever is
    higher (activity now is never averaged away). `extra_age_s` ages the job for tests."""
    c = cluster_of(ledger, instance.instance_id)
    if c is None or not c.run_id:
        return IdleSignals(None, None, 0)
    groups = run_process_groups(c.run_id)
    if not groups:
        return IdleSignals(None, None, 0)
    before, age_s = group_cpu(groups)
    time.sleep(sample_s)
    after, _ = group_cpu(groups)
    if age_s is None:
        return IdleSignals(None, None, 0)
    age_s += extra_age_s
    now_pct = _per_core(max(0.0, after - before) / sample_s * 100.0, len(groups))
    lifetime_pct = _per_core(before / max(age_s, 1e-6) * 100.0, len(groups))
    return IdleSignals(
        gpu_utilization_pct=None,
        cpu_utilization_pct=max(now_pct, lifetime_pct),
        samples=2,
        cpu_covered_minutes=min(float(window_minutes), age_s / 60),
    )


def set_local_tags(ledger: LedgerWriter, instance_id: str, tags: dict[str, str]) -> None:
    c = cluster_of(ledger, instance_id)
    if c is not None:
        ledger.upsert_cluster(replace(c, tags=dict(tags)))  # tags are merged by the ledger


def clear_local_tags(ledger: LedgerWriter, instance_id: str, keys: list[str]) -> None:
    """The ledger merges tags, so a cleared tag is stored empty (readers treat '' as absent)."""
    set_local_tags(ledger, instance_id, {k: "" for k in keys})


StopCluster = Callable[[LedgerWriter, str], object]  # (ledger, cluster name): ends the cluster's run


def stop_local_cluster(ledger: LedgerWriter, instance_id: str, stop_cluster: StopCluster) -> None:
    """End the cluster's run through `stop_cluster` (idempotent: an ended run is left alone)."""
    c = cluster_of(ledger, instance_id)
    if c is None:
        return
    stop_cluster(ledger, c.name)
