"""Containing a local job in a cgroup v2, so that stopping it reaches every process it started.

A job process that calls `setsid` leaves its rank's process group and session, and one that
also drops LAUNCHER_RUN_ID from its environment cannot be found by its environment either.
A cgroup is inherited by every child whatever it does with sessions or its environment, and
`cgroup.kill` (Linux 5.14+) kills a whole subtree at once, forks in flight included.

Layout: `<root>/<run id>/a<attempt>`, where `<root>` is `$LAUNCHER_CGROUP_ROOT` or else
`launcher/` under the first cgroup v2 mount (`/sys/fs/cgroup` on a unified host,
`/sys/fs/cgroup/unified` on a hybrid one). `LAUNCHER_CGROUP_ROOT=off` turns this off. Making
the cgroup needs write access there (root, or a delegated subtree); when it cannot be made or
joined, everything here is a no-op and the caller's fallback (process groups, sessions,
descendants, the run id in the environment) is all there is.

Only processes inside the run's own cgroup are ever signalled; waits are bounded.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

ENV = "LAUNCHER_CGROUP_ROOT"


def cgroup2_mount() -> Path | None:
    """The first cgroup v2 mount point in this mount namespace (None: there is none)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4].replace("\\040", " "))
    return None


def cgroup_root() -> Path | None:
    value = os.environ.get(ENV, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    mount = cgroup2_mount()
    return mount / "launcher" if mount is not None else None


def run_cgroup(run_id: str) -> Path | None:
    """The run's cgroup directory when it exists (None: none was made, or cgroups are off)."""
    root = cgroup_root()
    if root is None or not run_id or "/" in run_id or run_id.startswith("."):
        return None
    d = root / run_id
    return d if (d / "cgroup.procs").exists() else None


def make_attempt_cgroup(run_id: str, attempt: int) -> Path | None:
    """Make the attempt's cgroup; None when this host does not let us (no cgroup v2, no write access)."""
    root = cgroup_root()
    if root is None or not run_id or "/" in run_id or run_id.startswith("."):
        return None
    d = root / run_id / f"a{attempt}"
    try:
        for p in (root, root / run_id, d):
            if not p.is_dir():
                p.mkdir()
    except OSError:
        return None
    procs = d / "cgroup.procs"
    return d if procs.exists() and os.access(procs, os.W_OK) else None


def members(cgroup: Path | None) -> set[int]:
    """Pids of every process in the cgroup and its descendants."""
    found: set[int] = set()
    if cgroup is None:
        return found
    for dirpath, _dirs, _files in os.walk(cgroup):
        try:
            found |= {int(x) for x in Path(dirpath, "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return found


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _populated(cgroup: Path) -> bool:
    try:
        for line in (cgroup / "cgroup.events").read_text().splitlines():
            if line.startswith("populated "):
                return line.split()[1] != "0"
    except OSError:
        return False
    return bool(members(cgroup))


def terminate(cgroup: Path | None, *, already: Callable[[int], bool] = lambda pid: False) -> int:
    """SIGTERM every member not `already` signalled (the job's chance to save and exit: one
    notice each, or a job's handler runs twice). Returns how many were signalled."""
    pids = {pid for pid in members(cgroup) if not already(pid)}
    _signal_all(pids, signal.SIGTERM)
    return len(pids)


def kill(cgroup: Path | None, *, wait_s: float = 5.0, remove: bool = True) -> bool:
    """SIGKILL the whole subtree, wait (at most `wait_s`) until it is empty, then (`remove`)
    remove its directories. Returns True when the cgroup ended up empty (or there was none)."""
    if cgroup is None or not cgroup.is_dir():
        return True
    if _populated(cgroup):
        try:
            (cgroup / "cgroup.kill").write_text("1")
        except OSError:  # a kernel before 5.14: kill the members we see, again until none is left
            _signal_all(members(cgroup), signal.SIGKILL)
        deadline = time.monotonic() + wait_s
        while _populated(cgroup) and time.monotonic() < deadline:
            _signal_all(members(cgroup), signal.SIGKILL)
            time.sleep(0.02)
    empty = not _populated(cgroup)
    if empty and remove:
        remove_tree(cgroup)
    return empty


def remove_tree(cgroup: Path) -> None:
    """rmdir the cgroup and its children (bottom up); a busy one is left in place."""
    for dirpath, _dirs, _files in sorted(os.walk(cgroup), key=lambda w: -len(w[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass


def remove_if_empty(run_id: str) -> None:
    d = run_cgroup(run_id)
    if d is not None and not _populated(d):
        remove_tree(d)


def populated_runs() -> dict[str, set[int]]:
    """run id -> pids of the processes still in that run's cgroup (runs with none are left out)."""
    root = cgroup_root()
    out: dict[str, set[int]] = {}
    try:
        names = [d.name for d in root.iterdir() if d.is_dir()] if root is not None else []
    except OSError:
        return out
    for name in names:
        pids = members(root / name)
        if pids:
            out[name] = pids
    return out
