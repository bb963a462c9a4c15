"""What the reaper sees of the local backend.

A local cluster that the ledger records as up, and whose job processes are alive, is one
"instance" (this machine). Its idle signal is the CPU used by the job's process groups, sampled
over a short interval; the mark lives in the cluster's tags in the ledger; acting on it goes
through the `stop_cluster` the provider was given (the CLI gives it `launcher down`: the run's
controller stops the job cleanly, or the job is cleaned up when the controller is gone).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from launcher.procfs import proc_stats, run_process_groups
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


def _group_cpu_seconds(pgids: set[int]) -> float:
    ticks = sum(int(f[11]) + int(f[12]) for f in proc_stats() if int(f[2]) in pgids)  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_utilization_pct(run_id: str, sample_s: float = 1.0) -> float | None:
    """CPU used by the run's job processes over `sample_s`, in % of one core (a multi-threaded
    job can exceed 100). None when no process of the run is alive."""
    groups = run_process_groups(run_id)
    if not groups:
        return None
    before = _group_cpu_seconds(groups)
    time.sleep(sample_s)
    after = _group_cpu_seconds(groups)
    return max(0.0, (after - before) / sample_s * 100.0)


def local_idle_signals(ledger: LedgerReader, instance: InstanceInfo, sample_s: float = 1.0) -> IdleSignals:
    c = cluster_of(ledger, instance.instance_id)
    if c is None or not c.run_id:
        return IdleSignals(None, None, 0)
    cpu = cpu_utilization_pct(c.run_id, sample_s)
    return IdleSignals(gpu_utilization_pct=None, cpu_utilization_pct=cpu, samples=0 if cpu is None else 1)


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
