"""Database failures outside our control, told as what is wrong and what to do.

A full disk, a damaged or truncated file, a read-only home, a lost connection: each becomes one
LedgerUnavailableError (exit 5) that names the ledger and the remedy. The SQL statement and its
parameters (which may hold a spec's `envs` values) are never in the message; `--debug` shows the
chained original.
"""

from __future__ import annotations

import errno

from sqlalchemy.exc import DBAPIError, IntegrityError

from launcher.errors import ProviderError

DOCTOR = "run `launcher doctor` to check and repair it"


class LedgerUnavailableError(ProviderError):
    """Exit 5, like any other failure of a service we depend on."""


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
        if e.errno == errno.ENOSPC:
            return LedgerUnavailableError(f"the disk holding the ledger at {where} is full", hint="free space, then rerun")
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return LedgerUnavailableError(f"the ledger at {where} cannot be written ({e.strerror})", hint="make LAUNCHER_HOME writable, or point LAUNCHER_HOME elsewhere")
        return None
    if not isinstance(e, DBAPIError):
        return None
    msg = _driver_message(e)
    low = msg.lower()
    if "disk is full" in low or "no space" in low:
        return LedgerUnavailableError(f"the disk holding the ledger at {where} is full", hint="free space, then rerun; nothing was changed by the failed write")
    if "readonly" in low or "read-only" in low or "unable to open database" in low or "permission denied" in low:
        return LedgerUnavailableError(f"the ledger at {where} cannot be opened for writing ({msg})", hint="make LAUNCHER_HOME writable, or point LAUNCHER_HOME elsewhere")
    if "not a database" in low or "malformed" in low or "disk i/o error" in low or "no such table" in low:
        return LedgerUnavailableError(f"the ledger at {where} is damaged ({msg})", hint=f"restore it from a backup, or {DOCTOR}")
    if "locked" in low or "busy" in low:
        return LedgerUnavailableError(f"the ledger at {where} stayed locked by another process ({msg})", hint="retry; if it persists, " + DOCTOR)
    if getattr(e, "connection_invalidated", False) or "connection" in low:
        return LedgerUnavailableError(f"lost the connection to the ledger at {where} ({msg})", hint="check the database server, then rerun")
    return LedgerUnavailableError(f"the ledger at {where} failed: {msg}", hint=DOCTOR)
