"""Ending runs from outside the controller: `launcher down RUN|CLUSTER`, and the cleanup a
resumed controller does for the attempt its crashed predecessor left open.

Everything here is idempotent: running it twice, or after the controller already cleaned up,
changes nothing.

On declared clusters (Slurm, Kubernetes, SSH pools) the provider has nothing to terminate: the
allocation is the attempt's SkyPilot cluster, so teardown is the executor's `release` (`sky down`,
then SkyPilot asked that it is gone). A cluster whose release fails stays TERMINATING in the
ledger (never marked gone while SkyPilot may still hold it), for `down` or `doctor` to retry.
Before an open attempt is closed, SkyPilot is asked what its job did: a job that finished while
no controller watched is adopted (closed as it ended, its whole log fetched), one still running is
torn down and closed abandoned (the next attempt resumes from its checkpoint).
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
ReleaseFor = Callable[[str], object | None]  # provider name -> executor holding a SkyPilot cluster, or None


def default_release_for(provider: str):
    from launcher.executors import declared_cluster_executor

    return declared_cluster_executor(provider)


def sky_name(c: ClusterRecord) -> str:
    from launcher.executors.sky_cluster import sky_cluster_name

    return sky_cluster_name(handle_from_record(c))


def run_dir_for(run_id: str) -> Path:
    return paths.runs_dir() / run_id


def handle_from_record(c: ClusterRecord) -> ClusterHandle:
    nodes = tuple(Node(n.get("instance_id", ""), n.get("ip"), int(n.get("rank", i))) for i, n in enumerate(c.nodes))
    return ClusterHandle(cluster=c.name, provider=c.provider, region=c.region or "", zone=c.zone, nodes=nodes, stack=c.stack)


def terminate_cluster(
    ledger: LedgerWriter, c: ClusterRecord, provider_for: ProviderFor, *, run_id: str | None = None,
    release_for: ReleaseFor | None = None,
) -> bool:  # fmt: skip
    """Terminate one cluster (ledger first; on declared infra, its SkyPilot cluster through
    SkyPilot, verified). Returns True when something was done. ProviderError when SkyPilot
    cannot take it down: the cluster stays TERMINATING."""
    if c.state == ClusterState.TERMINATED:
        return False
    with ledger.transaction():  # recorded together, before the provider is asked
        ledger.set_cluster_state(c.name, ClusterState.TERMINATING)
        if run_id:
            ledger.add_event(run_id, EventKind.TEARDOWN, {"cluster": c.name, "by": "cleanup"})
    handle = handle_from_record(c)
    executor = (release_for or default_release_for)(c.provider)
    if executor is not None:
        try:
            executor.release(handle)
        except Exception as e:
            if run_id:
                ledger.add_event(run_id, EventKind.TEARDOWN, {"cluster": c.name, "by": "cleanup", "release_error": str(e)})
            raise
    provider_for(c.provider).terminate(handle)
    ledger.set_cluster_state(c.name, ClusterState.TERMINATED)
    return True


def down_sky_leftovers(clusters: list[ClusterRecord], release_for: ReleaseFor | None = None) -> list[str]:
    """The SkyPilot clusters of these ledger clusters that SkyPilot still lists, though the
    ledger says they are gone: taken down (verified). Asks SkyPilot only when one is on
    declared infra. Returns the SkyPilot names taken down."""
    release_for = release_for or default_release_for
    by_kind: dict[str, list[str]] = {}
    for c in clusters:
        if c.state == ClusterState.TERMINATED and release_for(c.provider) is not None:
            by_kind.setdefault(c.provider, []).append(sky_name(c))
    downed: list[str] = []
    for kind, names in by_kind.items():
        downed += release_for(kind).down(names)
    return downed


def _ended_remotely(ledger: LedgerWriter, run_id: str, run_dir: Path, attempts: list, release_for: ReleaseFor) -> dict:
    """attempt id -> how its job ended, asked of SkyPilot for attempts on declared infra; each
    answer (or why there is none) is an event."""
    from launcher.controller.ended_attempts import CLEANUP_EVENT

    out = {}
    for a in attempts:
        if not a.cluster:
            continue
        try:
            c = ledger.get_cluster(a.cluster)
        except NotFoundError:
            continue
        executor = release_for(c.provider)
        if executor is None:
            continue
        try:
            status, job = executor.ended_job(handle_from_record(c), run_dir, a.seq, a.num_nodes)
        except Exception as e:  # SkyPilot unreachable: closed with the caller's reason, torn down below
            ledger.add_event(run_id, CLEANUP_EVENT, {"attempt": a.seq, "sky_job": f"unknown: {e}"}, attempt_id=a.attempt_id)
            continue
        if job is not None:
            out[a.attempt_id] = job
        elif status != "gone":  # still running with nobody watching: torn down, the next attempt resumes
            ledger.add_event(run_id, CLEANUP_EVENT, {"attempt": a.seq, "sky_job": status, "decision": "tear down; resume from the last checkpoint"}, attempt_id=a.attempt_id)
    return out


def abandon_open_attempts(
    ledger: LedgerWriter, run_id: str, run_dir: Path, provider_for: ProviderFor, *, reason: str,
    release_for: ReleaseFor | None = None,
) -> int:  # fmt: skip
    """Kill the run's recorded local processes, close its open attempts (as their jobs ended
    while nobody watched, see `ended_attempts`, or as SkyPilot says they ended; else with
    `reason`), and terminate its clusters. Returns the number of attempts closed."""
    from launcher.controller.ended_attempts import close_attempt, ended_jobs
    from launcher.executors.local import kill_recorded_processes

    release_for = release_for or default_release_for
    open_ = ledger.open_attempts(run_id=run_id)
    ended = ended_jobs(run_dir, open_)  # before stopping anything
    ended.update(_ended_remotely(ledger, run_id, run_dir, [a for a in open_ if a.attempt_id not in ended], release_for))
    kill_recorded_processes(run_dir, grace_s=5.0, run_id=run_id)
    closed = 0
    for a in ledger.open_attempts(run_id=run_id):
        if close_attempt(ledger, a, run_dir, ended.get(a.attempt_id), reason=reason) is not None:
            closed += 1  # (None: someone else closed it first)
    for c in ledger.clusters(run_id=run_id):
        terminate_cluster(ledger, c, provider_for, run_id=run_id, release_for=release_for)
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
    release_for: ReleaseFor | None = None,
) -> DownResult:
    """Stop a run. A live controller is asked (ledger STOPPING + SIGTERM) and given `wait_s` to
    stop the job and tear down; an orphaned run is cleaned up here."""
    run = ledger.get_run(run_id)
    if is_terminal(run.state):
        clusters = ledger.clusters(run_id=run_id)
        n = sum(terminate_cluster(ledger, c, provider_for, run_id=run_id, release_for=release_for) for c in clusters)
        leftovers = down_sky_leftovers([c for c in clusters if c.state == ClusterState.TERMINATED], release_for)  # the ledger thought them gone
        if leftovers:
            ledger.add_event(run_id, EventKind.TEARDOWN, {"sky_clusters": leftovers, "by": "down", "why": "SkyPilot still listed them"})
            return DownResult(run_id, run.state, f"already ended; SkyPilot still had {', '.join(leftovers)}: taken down", n + len(leftovers))
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
    abandon_open_attempts(ledger, run_id, run_dir_for(run_id), provider_for, reason=EndReason.ABANDONED, release_for=release_for)
    try:
        rec = ledger.set_run_state(run_id, RunState.CANCELLED, reason=EndReason.CANCELLED, expected_from=RunState.STOPPING, data={"by": "down", "controller": live.why})
        state = rec.state
    except ConflictError:
        state = ledger.get_run(run_id).state
    return DownResult(run_id, state, f"cleaned up ({live.why})")


def down_target(ledger: LedgerWriter, target: str, provider_for: ProviderFor, *, wait_s: float = 30.0,
                release_for: ReleaseFor | None = None) -> DownResult:  # fmt: skip
    """`launcher down RUN|CLUSTER`: a run id (or unique prefix / name), or a cluster name."""
    try:
        run = ledger.find_run(target)
    except NotFoundError:
        try:
            c = ledger.get_cluster(target)
        except NotFoundError:
            c = _by_sky_name(ledger, target)  # `down gl-<cluster>`: the name `sky status` shows
            if c is None:
                raise NotFoundError(
                    f"no run or cluster named {target!r}", hint="see `launcher runs list` / `launcher status` (SkyPilot's gl-... names work too)"
                ) from None
        if c.run_id:
            run = ledger.get_run(c.run_id)
            if not is_terminal(run.state):
                return down_run(ledger, run.run_id, provider_for, wait_s=wait_s, release_for=release_for)
        n = int(terminate_cluster(ledger, c, provider_for, run_id=c.run_id, release_for=release_for))
        leftovers = [] if n else down_sky_leftovers([c], release_for)  # the ledger thought it gone already
        if leftovers and c.run_id:
            ledger.add_event(c.run_id, EventKind.TEARDOWN, {"sky_clusters": leftovers, "by": "down", "why": "SkyPilot still listed them"})
        if leftovers:
            how = f"cluster {c.name}: SkyPilot still had {', '.join(leftovers)}: taken down"
        else:
            how = f"cluster {c.name} terminated" if n else f"cluster {c.name} already terminated"
        return DownResult(c.run_id or "", "terminated", how, n + len(leftovers))
    return down_run(ledger, run.run_id, provider_for, wait_s=wait_s, release_for=release_for)


def _by_sky_name(ledger: LedgerWriter, name: str) -> ClusterRecord | None:
    """The ledger's cluster whose attempt's SkyPilot cluster is called `name` (declared infra)."""
    if not name.startswith("gl-"):
        return None
    from launcher.clusters import CLUSTER_KINDS

    for kind in CLUSTER_KINDS:
        for c in ledger.clusters(provider=kind):
            if sky_name(c) == name:
                return c
    return None
