"""Reading /proc (Linux): process start times, per-process CPU and group fields, a run's process groups."""

from __future__ import annotations

import os
from collections.abc import Iterator


def process_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid`, to tell a live process from a recycled pid after a crash."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


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
    """run id -> process groups of live processes carrying LAUNCHER_RUN_ID (ours excluded)."""
    own = os.getpgrp()
    found: dict[str, set[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            pgid = os.getpgid(int(entry))
        except (OSError, ProcessLookupError):
            continue
        for item in env:
            if item.startswith(b"LAUNCHER_RUN_ID=") and pgid != own:
                found.setdefault(item.split(b"=", 1)[1].decode(errors="replace"), set()).add(pgid)
    return found
