"""Processes, through psutil: start identities (to tell a live process from a recycled pid), CPU
use of process groups, a run's process groups and everything tied to them.

A process's identity is its kernel start time in clock ticks since boot (what /proc/<pid>/stat
holds; controller and rank records keep it as `start_ticks`): psutil's create time less the boot
time, in ticks. Process groups and sessions come from os.getpgid/os.getsid (psutil has none).
"""

from __future__ import annotations

import os
import time

import psutil

_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, PermissionError, OSError)
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _start_ticks(p: psutil.Process) -> int:
    return round((p.create_time() - psutil.boot_time()) * _TICKS_PER_S)


def process_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid`, to tell a live process from a recycled pid after a crash."""
    try:
        return _start_ticks(psutil.Process(pid))
    except _GONE:
        return None


def running_since(pid: int, start_ticks: int | None) -> bool:
    """Is `pid` still the process that started at `start_ticks`, and not a zombie (a zombie
    waits for its parent to reap it; there is nothing left to stop)?"""
    if start_ticks is None:
        return False
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and _start_ticks(p) == start_ticks
    except _GONE:
        return False


def process_group(pid: int) -> int | None:
    """The process group of `pid` (None when it is gone)."""
    try:
        return os.getpgid(pid)
    except _GONE:
        return None


def group_has_live_process(pgid: int) -> bool:
    """Does process group `pgid` hold a process that is not a zombie?"""
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except _GONE:
            continue
    return False


def group_cpu(pgids: set[int]) -> tuple[float, float | None]:
    """(CPU seconds the groups' live processes and their reaped children used, seconds since the
    oldest of them started); the age is None when none is alive."""
    cpu_s, oldest = 0.0, None
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) not in pgids:
                continue
            t = p.cpu_times()
            started = p.create_time()
        except _GONE:
            continue
        cpu_s += t.user + t.system + t.children_user + t.children_system
        oldest = started if oldest is None else min(oldest, started)
    return cpu_s, None if oldest is None else max(0.0, time.time() - oldest)


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
    for p in psutil.process_iter():
        try:
            run = p.environ().get("LAUNCHER_RUN_ID")
            if run is None:
                continue
            pgid, sid = os.getpgid(p.pid), os.getsid(p.pid)
        except _GONE:
            continue
        carriers.setdefault(run, []).append((p.pid, pgid, sid))
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
    for p in psutil.process_iter():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            ppid, pgid, sid = p.ppid(), os.getpgid(p.pid), os.getsid(p.pid)
        except _GONE:
            continue
        parent[p.pid] = ppid
        if pgid in pgids or sid in pgids:
            tied.add(p.pid)
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
