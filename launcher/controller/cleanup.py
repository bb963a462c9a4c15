"""Ending runs from outside the controller: `launcher down RUN|CLUSTER`, and the cleanup a
resumed controller does for the attempt its crashed predecessor left open.

Everything here is idempotent: running it twice, or after the controller already cleaned up,
changes nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launcher import paths
from launcher.controller.liveness import controller_liveness, latest_controller
from launcher.controller.states import LIVE_STATES, is_terminal
from launcher.errors import ConflictError, NotFoundError
from launcher.ledger.interfaces import LedgerWriter
from launcher.ledger.records import ClusterRecord, ClusterState, EndReason, EventKind, RunState
from launcher.providers.base import ClusterHandle, Node, Provider

ProviderFor = Callable[[str], Provider]


def run_dir_for(run_id: str) -> Path:
    return paths.runs_dir() / run_id


def handle_from_record(c: ClusterRecord) -> ClusterHandle:
    nodes = tuple(Node(n.get("instance_id", ""), n.get("ip"), int(n.get("rank", i))) for i, n in enumerate(c.nodes))
    return ClusterHandle(cluster=c.name, provider=c.provider, region=c.region or "", zone=c.zone, nodes=nodes, stack=c.stack)


def terminate_cluster(ledger: LedgerWriter, c: ClusterRecord, provider_for: ProviderFor, *, run_id: str | None = None) -> bool:
    """Terminate one cluster (ledger first). Returns True when something was done."""
    if c.state == ClusterState.TERMINATED:
        return False
    with ledger.transaction():  # recorded together, before the provider is asked
        ledger.set_cluster_state(c.name, ClusterState.TERMINATING)
        if run_id:
            ledger.add_event(run_id, EventKind.TEARDOWN, {"cluster": c.name, "by": "cleanup"})
    provider_for(c.provider).terminate(handle_from_record(c))
    ledger.set_cluster_state(c.name, ClusterState.TERMINATED)
    return True


def abandon_open_attempts(ledger: LedgerWriter, run_id: str, run_dir: Path, provider_for: ProviderFor, *, reason: str) -> int:
    """Kill the run's recorded local processes, close its open attempts (as their jobs ended
    while nobody watched, see `ended_attempts`; else with `reason`), and terminate its clusters.
    Returns the number of attempts closed."""
    from launcher.controller.ended_attempts import close_attempt, ended_jobs
    from launcher.executors.local import kill_recorded_processes

    ended = ended_jobs(run_dir, ledger.open_attempts(run_id=run_id))  # before stopping anything
    kill_recorded_processes(run_dir, grace_s=5.0, run_id=run_id)
    closed = 0
    for a in ledger.open_attempts(run_id=run_id):
        if close_attempt(ledger, a, run_dir, ended.get(a.attempt_id), reason=reason) is not None:
            closed += 1  # (None: someone else closed it first)
    for c in ledger.clusters(run_id=run_id):
        terminate_cluster(ledger, c, provider_for, run_id=run_id)
    return closed


@dataclass(frozen=True)
class DownResult:
    run_id: str
    state: str
    how: str  # "controller stopped it" | "cleaned up (controller was gone)" | "already ended"
    clusters_terminated: int = 0


def down_run(
    ledger: LedgerWriter,
    run_id: str,
    provider_for: ProviderFor,
    *,
    wait_s: float = 30.0,
    poll_s: float = 0.1,
) -> DownResult:
    """Stop a run. A live controller is asked (ledger STOPPING + SIGTERM) and given `wait_s` to
    stop the job and tear down; an orphaned run is cleaned up here."""
    run = ledger.get_run(run_id)
    if is_terminal(run.state):
        n = sum(terminate_cluster(ledger, c, provider_for, run_id=run_id) for c in ledger.clusters(run_id=run_id))
        return DownResult(run_id, run.state, "already ended", n)
    live = controller_liveness(ledger, run)
    if run.state != RunState.STOPPING:
        try:
            ledger.set_run_state(run_id, RunState.STOPPING, reason=EndReason.CANCELLED, expected_from=LIVE_STATES - {RunState.STOPPING})
        except ConflictError:
            run = ledger.get_run(run_id)
            if is_terminal(run.state):
                return DownResult(run_id, run.state, "already ended")
    if live.alive:
        info = latest_controller(ledger, run_id)
        # A server replica's controller watches the ledger for STOPPING; signalling its process
        # would stop every run that replica drives.
        if info is not None and info.pid != os.getpid() and not info.mode.startswith("server"):
            try:
                os.kill(info.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            run = ledger.get_run(run_id)
            if is_terminal(run.state):
                return DownResult(run_id, run.state, "controller stopped it")
            time.sleep(poll_s)
    # Orphaned (or the controller did not finish in time): clean up ourselves.
    abandon_open_attempts(ledger, run_id, run_dir_for(run_id), provider_for, reason=EndReason.ABANDONED)
    try:
        rec = ledger.set_run_state(run_id, RunState.CANCELLED, reason=EndReason.CANCELLED, expected_from=RunState.STOPPING, data={"by": "down", "controller": live.why})
        state = rec.state
    except ConflictError:
        state = ledger.get_run(run_id).state
    return DownResult(run_id, state, f"cleaned up ({live.why})")


def down_target(ledger: LedgerWriter, target: str, provider_for: ProviderFor, *, wait_s: float = 30.0) -> DownResult:
    """`launcher down RUN|CLUSTER`: a run id (or unique prefix / name), or a cluster name."""
    try:
        run = ledger.find_run(target)
    except NotFoundError:
        try:
            c = ledger.get_cluster(target)
        except NotFoundError:
            raise NotFoundError(f"no run or cluster named {target!r}", hint="see `launcher runs list` / `launcher status`") from None
        if c.run_id:
            run = ledger.get_run(c.run_id)
            if not is_terminal(run.state):
                return down_run(ledger, run.run_id, provider_for, wait_s=wait_s)
        n = int(terminate_cluster(ledger, c, provider_for, run_id=c.run_id))
        return DownResult(c.run_id or "", "terminated", f"cluster {c.name} terminated" if n else f"cluster {c.name} already terminated", n)
    return down_run(ledger, run.run_id, provider_for, wait_s=wait_s)
