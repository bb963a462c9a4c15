"""Is a run's controller alive? A controller records itself (pid, host, process start time) in a
`controller` event when it takes a run, and heartbeats while it holds it. A live run whose
controller process is gone (same host) or whose heartbeat is stale (other host) is *orphaned*:
`launcher status` says so, `launcher down RUN` cleans it up, `launch --resume RUN` continues it.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from launcher.controller.states import is_terminal
from launcher.ledger.interfaces import LedgerReader
from launcher.procfs import process_start_ticks

CONTROLLER_EVENT = "controller"
HEARTBEAT_INTERVAL_S = 1.0
STALE_AFTER_S = 60.0  # another host's controller is presumed dead after this long without a beat
SPAWN_FILE = "controller.spawn.json"  # in the run directory: the detached controller's pid before it takes the run


@dataclass(frozen=True)
class ControllerInfo:
    pid: int
    host: str
    start_ticks: int | None
    mode: str  # foreground | detached | resume


def this_controller(mode: str) -> ControllerInfo:
    pid = os.getpid()
    return ControllerInfo(pid=pid, host=socket.gethostname(), start_ticks=process_start_ticks(pid), mode=mode)


def pid_alive(pid: int, start_ticks: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now_ticks = process_start_ticks(pid)
    if start_ticks is not None and now_ticks is not None and now_ticks != start_ticks:
        return False  # pid reused
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        pass
    return True


def latest_controller(ledger: LedgerReader, run_id: str) -> ControllerInfo | None:
    events = ledger.events(run_id, kind=CONTROLLER_EVENT)
    if not events:
        return None
    d = events[-1].data
    return ControllerInfo(int(d["pid"]), str(d["host"]), d.get("start_ticks"), str(d.get("mode", "")))


@dataclass(frozen=True)
class Liveness:
    alive: bool
    why: str


def controller_liveness(ledger: LedgerReader, run, *, now: datetime | None = None) -> Liveness:
    """For a live (non-terminal) run: is someone driving it?"""
    if is_terminal(run.state):
        return Liveness(False, "ended")
    info = latest_controller(ledger, run.run_id)
    if info is None:
        spawned = spawned_controller(run.run_id)
        if spawned is not None and spawned.host == socket.gethostname() and not pid_alive(spawned.pid, spawned.start_ticks):
            return Liveness(False, f"controller pid {spawned.pid} exited before taking the run")
        created = run.created_at or datetime.now(UTC)
        age = ((now or datetime.now(UTC)) - created).total_seconds()
        if age < STALE_AFTER_S:
            return Liveness(True, "starting")
        return Liveness(False, "no controller ever took this run")
    if info.host == socket.gethostname():
        if pid_alive(info.pid, info.start_ticks):
            return Liveness(True, f"controller pid {info.pid}")
        return Liveness(False, f"controller pid {info.pid} is gone")
    beat = ledger.last_heartbeat(run_id=run.run_id)
    if beat is None:
        return Liveness(False, f"no heartbeat from {info.host}")
    age = ((now or datetime.now(UTC)) - beat).total_seconds()
    if age > STALE_AFTER_S:
        return Liveness(False, f"last heartbeat from {info.host} {age:.0f}s ago")
    return Liveness(True, f"controller on {info.host}")


def record_spawn(run_dir, pid: int) -> None:
    """Written by `launch --detach` right after starting the controller, so a controller that dies
    in its first second is told from one still starting."""
    import json

    from launcher.atomic import atomic_write_text

    info = {"pid": pid, "host": socket.gethostname(), "start_ticks": process_start_ticks(pid)}
    atomic_write_text(run_dir / SPAWN_FILE, json.dumps(info))


def spawned_controller(run_id: str) -> ControllerInfo | None:
    import json

    from launcher import paths

    try:
        d = json.loads((paths.runs_dir() / run_id / SPAWN_FILE).read_text())
        return ControllerInfo(int(d["pid"]), str(d["host"]), d.get("start_ticks"), "detached")
    except (OSError, ValueError, KeyError, TypeError):
        return None
