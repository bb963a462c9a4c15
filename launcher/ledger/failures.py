"""Database failures outside our control, told as what is wrong and what to do.

A full disk, a damaged or truncated file, a read-only home, a lost connection: each becomes one
LedgerUnavailableError (exit 5) that names the ledger and the remedy. The SQL statement and its
parameters (which may hold a spec's `envs` values) are never in the message; `--debug` shows the
chained original.
"""

from __future__ import annotations

import errno
from pathlib import Path

from sqlalchemy.exc import DBAPIError, IntegrityError

from launcher.errors import DiskFullError, ProviderError, free_bytes, human_bytes
from launcher.ledger.engine import sqlite_path

DOCTOR = "run `launcher doctor` to check and repair it"


class LedgerUnavailableError(ProviderError):
    """Exit 5, like any other failure of a service we depend on."""


class LedgerDiskFullError(LedgerUnavailableError, DiskFullError):
    """The ledger's filesystem is full (exit 5)."""


LOW_SPACE_BYTES = 1 << 20  # below this much free space a SQLite failure is told as a full disk


def _path(where: str) -> Path | None:
    try:
        return sqlite_path(where)
    except Exception:  # not a URL we can read a path from
        return None


def _disk_full(where: str, *, rolled_back: bool) -> LedgerDiskFullError:
    path = _path(where)
    free = free_bytes(path.parent) if path is not None else None
    room = f" ({human_bytes(free)} free there; free at least {human_bytes(LOW_SPACE_BYTES)} for its write-ahead log)" if free is not None else ""
    hint = "free space, then rerun" + ("; nothing was changed by the failed write" if rolled_back else "")
    return LedgerDiskFullError(f"disk full: the disk holding the ledger at {where} is full{room}", hint=hint)


def integrity(path: Path) -> tuple[bool | None, str]:
    """SQLite's `quick_check` of the file, read-only and without its write-ahead log or any new
    file (so it works on a full disk): (True, "ok"), (False, what is wrong) or (None, why no check
    could run)."""
    import sqlite3

    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=5)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        low = str(e).lower()
        if "not a database" in low or "malformed" in low or "corrupt" in low:
            return False, str(e)
        return None, str(e)
    except OSError as e:
        return None, e.strerror or str(e)
    if rows == [("ok",)]:
        return True, "ok"
    return False, "; ".join(str(r[0]) for r in rows[:3])


def _read_failure(where: str, msg: str) -> LedgerUnavailableError:
    """A SQLite error that may mean a damaged file, or only a full disk or a failing device: the
    file is called damaged only when an integrity check says so."""
    path = _path(where)
    if path is None or not path.exists():
        return LedgerUnavailableError(f"the ledger at {where} failed ({msg})", hint=DOCTOR)
    verdict, detail = integrity(path)
    if verdict is False:
        return LedgerUnavailableError(f"the ledger at {where} is damaged ({msg}; integrity check: {detail})", hint=f"restore it from a backup, or {DOCTOR}")
    free = free_bytes(path.parent)
    if free is not None and free < LOW_SPACE_BYTES:
        return _disk_full(where, rolled_back=False)
    if verdict is True:
        return LedgerUnavailableError(
            f"the ledger at {where} could not be used ({msg}), although an integrity check finds the file intact",
            hint="check the disk (free space, errors in the system log), then rerun; " + DOCTOR,
        )
    return LedgerUnavailableError(f"the ledger at {where} could not be used ({msg}); no integrity check could run ({detail})", hint=DOCTOR)


def _driver_message(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    args = getattr(orig, "args", None)
    return str(args[0]) if args else type(orig).__name__


def explain(e: BaseException, where: str) -> LedgerUnavailableError | None:
    """The readable error for a database failure, or None for errors the ledger handles itself
    (constraint violations) and for non-database errors."""
    if isinstance(e, IntegrityError):
        return None
    if isinstance(e, OSError):
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return _disk_full(where, rolled_back=False)
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return LedgerUnavailableError(f"the ledger at {where} cannot be written ({e.strerror})", hint="make LAUNCHER_HOME writable, or point LAUNCHER_HOME elsewhere")
        return None
    if not isinstance(e, DBAPIError):
        return None
    msg = _driver_message(e)
    low = msg.lower()
    if "disk is full" in low or "no space" in low:
        return _disk_full(where, rolled_back=True)
    if "readonly" in low or "read-only" in low or "unable to open database" in low or "permission denied" in low:
        return LedgerUnavailableError(f"the ledger at {where} cannot be opened for writing ({msg})", hint="make LAUNCHER_HOME writable, or point LAUNCHER_HOME elsewhere")
    if "not a database" in low or "malformed" in low or "disk i/o error" in low or "no such table" in low:
        return _read_failure(where, msg)
    if "locked" in low or "busy" in low:
        return LedgerUnavailableError(f"the ledger at {where} stayed locked by another process ({msg})", hint="retry; if it persists, " + DOCTOR)
    if getattr(e, "connection_invalidated", False) or "connection" in low:
        return LedgerUnavailableError(f"lost the connection to the ledger at {where} ({msg})", hint="check the database server, then rerun")
    return LedgerUnavailableError(f"the ledger at {where} failed: {msg}", hint=DOCTOR)
