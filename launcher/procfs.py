"""Reading /proc (Linux): process start times, per-process CPU and group fields, a run's process groups."""

from __future__ import annotations

import os
from collections.abc import Iterator


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state at [0], pgrp at [2], start
    time at [19]); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _int(fields: list[str] | None, i: int) -> int | None:
    try:
        return int(fields[i]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def process_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid`, to tell a live process from a recycled pid after a crash."""
    return _int(_stat_fields(pid), 19)


def running_since(pid: int, start_ticks: int | None) -> bool:
    """Is `pid` still the process that started at `start_ticks`, and not a zombie (a zombie
    waits for its parent to reap it; there is nothing left to stop)?"""
    fields = _stat_fields(pid)
    if start_ticks is None or fields is None or fields[0] == "Z":
        return False
    return _int(fields, 19) == start_ticks


def process_group(pid: int) -> int | None:
    """The process group of `pid` (None when it is gone)."""
    return _int(_stat_fields(pid), 2)


def proc_stats() -> Iterator[list[str]]:
    """For every process: the fields of /proc/<pid>/stat after the command name (state at [0],
    ppid, pgrp at [2], ..., utime at [11], stime at [12]); processes that vanish are skipped."""
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                yield f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def run_process_groups(run_id: str) -> set[int]:
    """Process groups of live processes whose environment says LAUNCHER_RUN_ID=<run_id>.

    This finds a run's job processes even when the controller died between spawning them and
    writing procs.json (every rank's environment carries the run id)."""
    return all_run_process_groups().get(run_id, set())


def all_run_process_groups() -> dict[str, set[int]]:
    """run id -> process groups of live processes carrying LAUNCHER_RUN_ID.

    Only groups whose leader carries the run id and leads its own session count (a rank is
    started in a session of its own, and so is a job child that called setsid): a process that
    carries a run id inside someone else's group or session (a terminal's, a test runner's, ours)
    must never get that whole group or session signalled."""
    return {run: set(groups) for run, (groups, _lone) in _run_processes().items()}


def run_lone_processes(run_id: str) -> dict[int, int | None]:
    """pid -> start ticks of processes carrying LAUNCHER_RUN_ID=<run_id> in a group that is not
    their own session's (see all_run_process_groups): to be signalled one by one, never as a group."""
    return dict(_run_processes().get(run_id, (set(), {}))[1])


def _run_processes() -> dict[str, tuple[set[int], dict[int, int | None]]]:
    own_group, own_session, me = os.getpgrp(), os.getsid(0), os.getpid()
    carriers: dict[str, list[tuple[int, int, int]]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            pgid, sid = os.getpgid(pid), os.getsid(pid)
        except (OSError, ProcessLookupError):
            continue
        for item in env:
            if item.startswith(b"LAUNCHER_RUN_ID="):
                carriers.setdefault(item.split(b"=", 1)[1].decode(errors="replace"), []).append((pid, pgid, sid))
    found: dict[str, tuple[set[int], dict[int, int | None]]] = {}
    for run, procs in carriers.items():
        # A group is the run's when its leader carries the run id and leads its own session.
        groups = {pid for pid, pgid, sid in procs if pid == pgid == sid and pgid not in (own_group, own_session)}
        lone = {pid: process_start_ticks(pid) for pid, pgid, _sid in procs if pgid not in groups and pgid != own_group and pid != me}
        found[run] = (groups, lone)
    return found


def session_and_descendants(pgids: set[int]) -> dict[int, int | None]:
    """pid -> start ticks of live processes tied to these process groups (each a rank, leader of
    its own session): members of the groups, of their sessions (a job's own job-control groups),
    and every descendant of those (a child that called setsid, while its parent lives).
    Zombies are left out: there is nothing to stop."""
    parent: dict[int, int] = {}
    tied: set[int] = set()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])
        if int(fields[2]) in pgids or int(fields[3]) in pgids:
            tied.add(pid)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(tied)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tied:
                tied.add(child)
                todo.append(child)
    tied.discard(os.getpid())
    return {pid: process_start_ticks(pid) for pid in tied}
