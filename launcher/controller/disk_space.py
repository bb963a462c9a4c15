"""A full disk ends a run cleanly instead of stranding it.

While an attempt runs, the controller keeps a small reserve file (`RESERVE_BYTES`, or half the
room left when that is less; allocated for real with posix_fallocate) in the run's directory. When the filesystem holding the run
(its logs) runs out (`LOG_MIN_FREE_BYTES` left), or a write fails with ENOSPC, the controller
deletes the reserve first: that room is what lets it stop the job, close the attempt and write
the run's end (`disk_full`) to a SQLite ledger on the same disk.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from launcher.errors import DiskFullError, LauncherError, disk_full, free_bytes, human_bytes

RESERVE_FILE = ".space-reserve"
RESERVE_BYTES = 4 << 20
LOG_MIN_FREE_BYTES = 64 << 10  # below this a job's log cannot be kept


class SpaceReserve:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / RESERVE_FILE
        self.held = False

    def take(self) -> SpaceReserve:
        """Allocate the reserve: RESERVE_BYTES, or half the room left when that is less (quietly
        nothing when there is hardly any room already)."""
        free = free_bytes(self.path.parent)
        size = RESERVE_BYTES if free is None else min(RESERVE_BYTES, free // 2)
        if size < LOG_MIN_FREE_BYTES:
            return self
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
            self.held = True
        except OSError:
            self.release()
        return self

    def release(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass
        self.held = False


def log_space_error(run_dir: Path) -> DiskFullError | None:
    """A DiskFullError when the filesystem holding the run's logs is (nearly) full."""
    logs = run_dir / "logs"
    free = free_bytes(logs)
    if free is None or free >= LOG_MIN_FREE_BYTES:
        return None
    return DiskFullError(
        f"disk full: the job's log at {logs} cannot be written ({human_bytes(free)} free there; "
        f"a running job needs at least {human_bytes(LOG_MIN_FREE_BYTES)})",
        hint="free space on that filesystem, then rerun",
    )


def as_disk_full(e: BaseException, where: Path | None = None) -> DiskFullError | None:
    """`e` as a DiskFullError when it is one (a ledger or file write on a full disk), else None.
    `where`: the directory to name when the failed write did not say which file it was."""
    if isinstance(e, DiskFullError):
        return e
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        if e.filename:
            return disk_full("a file", e.filename)
        if where is not None:
            return disk_full("a file under", where)
        return DiskFullError("disk full: a write failed (no space left on the device)")
    if isinstance(e, LauncherError) and isinstance(e.__cause__, OSError):
        return as_disk_full(e.__cause__, where)
    return None
