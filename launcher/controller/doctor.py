"""`launcher doctor`: check the ledger and the runs it records, repair what can be repaired, and
say plainly what cannot.

Checks, in order (a failed file check stops the rest: nothing else can be trusted):
  ledger-file      SQLite integrity (quick_check); a write-ahead log left behind is folded back
                   into the database (repaired). Damage cannot be repaired here: restore a backup.
  schema           the stored revision is the code's head (an open upgrades it: repaired).
  stuck-runs       live runs nobody drives (controller gone): you choose, `launch --resume` or
                   `launcher down`; ended runs with attempts still open get them closed (repaired).
  orphan-processes job processes of runs that ended, or that the ledger does not know (stopped).
  stale-clusters   local clusters recorded up for runs that ended and run nothing (terminated).
  sky-clusters     SkyPilot clusters on declared infra (Slurm, Kubernetes, SSH pools) that SkyPilot
                   still lists though the ledger says their attempt is over (a controller killed
                   before its teardown): taken down through SkyPilot, verified (repaired). Asked
                   only when the ledger has clusters on declared infra; a SkyPilot cluster the
                   ledger does not know is reported, not touched.
Nothing is created: with no ledger yet there is nothing to check.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

OK, REPAIRED, NEEDS_YOU, BROKEN = "ok", "repaired", "needs you", "cannot repair"


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # ok | repaired | needs you | cannot repair
    detail: str

    def to_json(self) -> dict:
        return {"check": self.check, "status": self.status, "detail": self.detail}


def run_doctor(url: str, sqlite_file: Path | None, *, repair: bool = True) -> list[Finding]:
    out: list[Finding] = []
    if sqlite_file is not None:
        if not sqlite_file.exists():
            return [Finding("ledger-file", OK, f"no ledger at {sqlite_file} yet: nothing to check")]
        f = _check_sqlite_file(sqlite_file, repair)
        out.append(f)
        if f.status == BROKEN:
            return out
    from launcher.ledger import Ledger
    from launcher.ledger.engine import SCHEMA_HEAD, _stored_revision, make_engine

    engine = make_engine(url)
    try:
        before = _stored_revision(engine)
    finally:
        engine.dispose()
    if before != SCHEMA_HEAD and not repair:
        out.append(Finding("schema", NEEDS_YOU, f"schema at revision {before}, code expects {SCHEMA_HEAD}; the next open upgrades it"))
        return out
    with Ledger(url) as led:
        out.append(Finding("schema", REPAIRED if before != SCHEMA_HEAD else OK,
                           f"upgraded from {before} to {SCHEMA_HEAD}" if before != SCHEMA_HEAD else f"revision {SCHEMA_HEAD}"))
        out += _check_runs(led, repair)
        out += _check_processes(led, repair)
        out += _check_clusters(led, repair)
        out += _check_sky_clusters(led, repair)
    return out


def _check_sqlite_file(path: Path, repair: bool) -> Finding:
    wal = Path(str(path) + "-wal")
    had_wal = wal.exists() and wal.stat().st_size > 0
    try:
        con = sqlite3.connect(f"file:{path}?mode={'rw' if repair else 'ro'}", uri=True, timeout=30)
    except sqlite3.Error as e:
        return Finding("ledger-file", BROKEN, f"cannot open {path}: {e}; restore it from a backup")
    try:
        rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            shown = "; ".join(rows[:3])
            return Finding("ledger-file", BROKEN, f"{path} is damaged ({shown}); restore it from a backup (copy the damaged file aside first)")
        if had_wal and repair:
            busy, log_pages, done = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                return Finding("ledger-file", NEEDS_YOU, f"{path}: a write-ahead log of {log_pages} pages is in use by another process; rerun when it is idle")
            return Finding("ledger-file", REPAIRED, f"{path}: integrity ok; folded {done} write-ahead log pages into the database")
        return Finding("ledger-file", OK, f"{path}: integrity ok")
    except sqlite3.DatabaseError as e:
        return Finding("ledger-file", BROKEN, f"{path} is damaged ({e}); restore it from a backup (copy the damaged file aside first)")
    finally:
        con.close()


def _check_runs(led, repair: bool) -> list[Finding]:
    from launcher.controller.liveness import controller_liveness
    from launcher.controller.states import is_terminal
    from launcher.ledger.records import EndReason

    out = []
    for run in led.list_runs():
        if is_terminal(run.state):
            if repair:  # an ended run's empty cgroup (its job ended while no controller watched)
                from launcher.executors.job_cgroup import remove_if_empty

                remove_if_empty(run.run_id)
            open_ = led.open_attempts(run_id=run.run_id)
            if not open_:
                continue
            if not repair:
                out.append(Finding("stuck-runs", NEEDS_YOU, f"run {run.run_id} ended ({run.state}) with {len(open_)} attempt(s) still open"))
                continue
            from launcher.controller.ended_attempts import close_attempt, ended_jobs
            from launcher.controller.runner import run_dir

            ended = ended_jobs(run_dir(run.run_id), open_)
            how = [close_attempt(led, a, run_dir(run.run_id), ended.get(a.attempt_id), reason=EndReason.ABANDONED) for a in open_]
            said = ", ".join(f"{a.attempt_id} as {h}" for a, h in zip(open_, how, strict=True) if h)
            n = sum(1 for h in how if h)
            out.append(Finding("stuck-runs", REPAIRED, f"run {run.run_id} ended ({run.state}): closed {n} attempt(s) left open ({said or 'none'})"))
            continue
        live = controller_liveness(led, run)
        if not live.alive:
            out.append(Finding("stuck-runs", NEEDS_YOU, f"run {run.run_id} is {run.state} but nobody drives it ({live.why}): "
                               f"`launch --resume {run.run_id}` to continue it, or `launcher down {run.run_id}` to stop it"))
    if not out:
        out.append(Finding("stuck-runs", OK, "every live run has a live controller; no ended run has open attempts"))
    return out


def _run_ids_of_processes() -> dict[str, set[int]]:
    """run id -> process groups of live processes carrying LAUNCHER_RUN_ID or in the run's cgroup."""
    from launcher.executors.job_cgroup import populated_runs
    from launcher.procfs import all_run_process_groups

    found = all_run_process_groups()
    for run_id, pids in populated_runs().items():
        for pid in pids:
            try:
                found.setdefault(run_id, set()).add(os.getpgid(pid))
            except (ProcessLookupError, PermissionError):
                pass
    return found


def _check_processes(led, repair: bool) -> list[Finding]:
    from launcher.controller.runner import run_dir
    from launcher.controller.states import is_terminal
    from launcher.errors import NotFoundError
    from launcher.executors.local import kill_recorded_processes

    out = []
    for run_id, groups in sorted(_run_ids_of_processes().items()):
        try:
            state = led.get_run(run_id).state
        except NotFoundError:
            state = None
        if state is not None and not is_terminal(state):
            continue
        why = f"run {run_id} ended ({state})" if state else f"run {run_id} is unknown to this ledger"
        if state is None and not run_dir(run_id).exists():
            continue  # another LAUNCHER_HOME's job: not ours to judge or stop
        if not repair:
            out.append(Finding("orphan-processes", NEEDS_YOU, f"{why} but process groups {sorted(groups)} still run"))
            continue
        stopped = kill_recorded_processes(run_dir(run_id), grace_s=5.0, run_id=run_id)
        out.append(Finding("orphan-processes", REPAIRED, f"{why}: stopped process groups {sorted(stopped)}"))
    if not out:
        out.append(Finding("orphan-processes", OK, "no job process outlives its run"))
    return out


def _check_clusters(led, repair: bool) -> list[Finding]:
    from launcher.controller.states import is_terminal
    from launcher.errors import NotFoundError
    from launcher.executors.local import run_process_groups
    from launcher.ledger.records import ClusterState

    out = []
    for c in led.clusters(provider="local", state=(ClusterState.UP, ClusterState.PROVISIONING)):
        if not c.run_id:
            continue
        try:
            ended = is_terminal(led.get_run(c.run_id).state)
        except NotFoundError:
            ended = True
        if not ended or run_process_groups(c.run_id):
            continue
        if repair:
            led.set_cluster_state(c.name, ClusterState.TERMINATED)
            out.append(Finding("stale-clusters", REPAIRED, f"local cluster {c.name} of ended run {c.run_id} was recorded {c.state}: marked terminated"))
        else:
            out.append(Finding("stale-clusters", NEEDS_YOU, f"local cluster {c.name} of ended run {c.run_id} is recorded {c.state}"))
    if not out:
        out.append(Finding("stale-clusters", OK, "no local cluster outlives its run"))
    return out


def _check_sky_clusters(led, repair: bool, release_for=None) -> list[Finding]:
    from launcher.clusters import CLUSTER_KINDS
    from launcher.controller.cleanup import default_release_for, sky_name
    from launcher.controller.states import is_terminal
    from launcher.errors import NotFoundError
    from launcher.ledger.records import ClusterState

    release_for = release_for or default_release_for
    declared = [c for kind in CLUSTER_KINDS for c in led.clusters(provider=kind)]
    if not declared:
        return [Finding("sky-clusters", OK, "no cluster on declared infra (Slurm, Kubernetes, SSH) in the ledger")]
    executor = release_for(declared[0].provider)
    try:
        listed = executor.leftovers(None)  # every SkyPilot cluster of our API server (one bounded call)
    except Exception as e:
        return [Finding("sky-clusters", NEEDS_YOU, f"cannot ask SkyPilot which clusters it holds: {e}")]
    by_name = {sky_name(c): c for c in declared}
    out = []
    for name, status in sorted(listed.items()):
        c = by_name.get(name)
        if c is None:
            if name.startswith("gl-"):
                out.append(Finding("sky-clusters", NEEDS_YOU, f"SkyPilot cluster {name} ({status}) is not in this ledger; "
                                   f"if it is yours: `sky down {name}` (with HOME={_sky_home()})"))
            continue
        try:
            ended = c.run_id is None or is_terminal(led.get_run(c.run_id).state)
        except NotFoundError:
            ended = True
        if c.state not in (ClusterState.TERMINATED, ClusterState.TERMINATING) and not ended:
            continue  # a live attempt's cluster
        why = f"SkyPilot cluster {name} ({status}) of {c.name} (run {c.run_id}, ledger: {c.state}) still holds its allocation"
        if not repair:
            out.append(Finding("sky-clusters", NEEDS_YOU, f"{why}; `launcher down {name}` takes it down"))
            continue
        try:
            release_for(c.provider).down([name])
        except Exception as e:
            out.append(Finding("sky-clusters", BROKEN, f"{why}; `sky down` failed: {e}"))
            continue
        led.set_cluster_state(c.name, ClusterState.TERMINATED)
        if c.run_id:
            led.add_event(c.run_id, "teardown", {"cluster": c.name, "sky_clusters": [name], "by": "doctor"})
        out.append(Finding("sky-clusters", REPAIRED, f"{why}: taken down (sky down, then SkyPilot no longer lists it)"))
    for c in declared:  # recorded terminating (a release that failed) but SkyPilot holds nothing
        if c.state == ClusterState.TERMINATING and sky_name(c) not in listed and repair:
            led.set_cluster_state(c.name, ClusterState.TERMINATED)
            out.append(Finding("sky-clusters", REPAIRED, f"{c.name} was recorded terminating; SkyPilot holds nothing of it: marked terminated"))
    if not out:
        out.append(Finding("sky-clusters", OK, f"SkyPilot holds no cluster of an ended attempt ({len(listed)} listed)"))
    return out


def _sky_home() -> str:
    from launcher.executors.sky_server import sky_home

    return str(sky_home())
