"""The one error hierarchy. The CLI catches `LauncherError` once and maps it to an exit code.

The libraries `pricing` and `infra` raise their own errors (`pricing.errors`, `infra.errors`);
`as_launcher_error` turns one into the LauncherError of the same kind (the table below is the
only place that knows which exit code each library error means).

Every error carries a readable message (and optionally a hint such as "did you mean ...").
Anything that is not a LauncherError is a bug: the CLI prints it briefly (full traceback with
--debug) and exits with INTERNAL.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from enum import IntEnum

from pricing.errors import did_you_mean  # noqa: F401 - one "did you mean" for every name


class ExitCode(IntEnum):
    OK = 0
    JOB_FAILED = 1  # the user's job ran and failed (non-zero exit, setup failure)
    BAD_INPUT = 2  # malformed spec/flags/config, unknown names, nothing matches
    REFUSED = 3  # a policy refused: budget, deadline, user declined the plan
    CREDENTIALS = 4  # a provider is needed but has no credentials
    PROVIDER = 5  # a cloud/provider/tool call failed (API error, missing CLI)
    CONFLICT = 6  # another process holds the lock, state is busy
    NOT_FOUND = 7  # run/cluster/stack not found
    INTERRUPTED = 130
    INTERNAL = 70  # a bug


class LauncherError(Exception):
    """Base of all expected errors."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class BadInputError(LauncherError):
    exit_code = ExitCode.BAD_INPUT


class SpecError(BadInputError):
    """A task spec or config file is malformed."""


class UnknownNameError(BadInputError):
    """An unknown GPU, cloud, region, policy ... with suggestions."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, extra: str = "") -> None:
        known = sorted(set(known))
        hint = did_you_mean(name, known)
        msg = f"unknown {kind} {name!r}{extra}"
        super().__init__(msg, hint=hint)
        self.kind = kind
        self.name = name


class NoOfferError(BadInputError):
    """Filters leave no offer."""


class RefusedError(LauncherError):
    exit_code = ExitCode.REFUSED


class BudgetExceededError(RefusedError):
    pass


class CredentialsError(LauncherError):
    exit_code = ExitCode.CREDENTIALS


class ProviderError(LauncherError):
    exit_code = ExitCode.PROVIDER


class TransientProviderError(ProviderError):
    """A provider call failed in a way worth trying again that no SDK retry already covered
    (cloud SDK calls are retried by botocore / google-api-core themselves; their final errors
    are plain ProviderErrors and are not retried again)."""


class ToolMissingError(ProviderError):
    """An external tool (Pulumi CLI, podman, ...) is needed and absent."""


class ConflictError(LauncherError):
    exit_code = ExitCode.CONFLICT


class NotFoundError(LauncherError):
    exit_code = ExitCode.NOT_FOUND


class JobFailedError(LauncherError):
    exit_code = ExitCode.JOB_FAILED


class DiskFullError(ProviderError):
    """A write failed because its filesystem is full (ENOSPC, EDQUOT): exit 5, saying what could
    not be written, where, how much is free and (when known) how much the write needed."""


class StateAccessError(ProviderError):
    """The launcher's own state (LAUNCHER_HOME, the ledger) cannot be read or written by this
    user: exit 5, like any other unusable ledger (see the README's exit codes)."""


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return p


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding `path`."""
    try:
        st = os.statvfs(_nearest_existing(os.fspath(path)))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def disk_full(what: str, path: str | os.PathLike, *, needed_bytes: int | None = None) -> DiskFullError:
    """The DiskFullError for `what` (e.g. "the job's log") at `path`."""
    free = free_bytes(path)
    parts = [f"{human_bytes(free)} free there" if free is not None else "free space unknown"]
    if needed_bytes:
        parts.append(f"it needed {human_bytes(needed_bytes)}")
    return DiskFullError(
        f"disk full: {what} at {os.fspath(path)} could not be written ({'; '.join(parts)})",
        hint="free space on that filesystem (or point LAUNCHER_HOME elsewhere), then rerun",
    )


def from_os_error(e: OSError, *, state_home: str | os.PathLike | None = None) -> LauncherError | None:
    """The readable error for an OSError that is not a bug: a full disk (exit 5) or a permission
    denied on a file (inside `state_home`: the launcher's state, exit 5; elsewhere: bad input,
    exit 2). None for the rest."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return disk_full("a file", e.filename) if e.filename else DiskFullError("disk full: a write failed (no space left on the device)")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and e.filename:
        name = os.fspath(e.filename)
        home = os.path.abspath(state_home) if state_home is not None else None
        if home is not None and (os.path.abspath(name) == home or os.path.abspath(name).startswith(home + os.sep)):
            owner = _owner(home)
            return StateAccessError(
                f"cannot use the launcher's state at {home}: {e.strerror} on {name}" + (f" (owned by {owner})" if owner else ""),
                hint="point LAUNCHER_HOME at a directory of your own (or fix its owner and mode)",
            )
        return BadInputError(f"cannot access {name}: {e.strerror}")
    return None


def _owner(path: str) -> str | None:
    try:
        import pwd

        uid = os.stat(_nearest_existing(path)).st_uid
    except (OSError, ImportError):
        return None
    if uid == os.geteuid():
        return None
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def _library_errors() -> tuple[tuple[type[Exception], type[LauncherError]], ...]:
    from infra import errors as ie
    from pricing import errors as pe

    # Most specific first: the first class an error is an instance of decides.
    return (
        (pe.UnknownNameError, UnknownNameError),
        (pe.NoOfferError, NoOfferError),
        (pe.PricingInputError, BadInputError),
        (pe.PricingCredentialsError, CredentialsError),
        (pe.PricingSourceError, ProviderError),
        (pe.PricingBusyError, ConflictError),
        (ie.InfraInputError, BadInputError),
        (ie.StackBusyError, ConflictError),
        (ie.StackNotFoundError, NotFoundError),
        (ie.ToolMissingError, ToolMissingError),
        (ie.InfraProviderError, ProviderError),
    )


def library_error_types() -> tuple[type[Exception], ...]:
    """The base classes of the libraries' expected errors."""
    from infra.errors import InfraError
    from pricing.errors import PricingError

    return (PricingError, InfraError)


def as_launcher_error(exc: Exception) -> LauncherError:
    """A pricing/infra error as the LauncherError of the same kind (same message, hint, exit code)."""
    if isinstance(exc, LauncherError):
        return exc
    for lib_cls, ours in _library_errors():
        if isinstance(exc, lib_cls):
            err = LauncherError.__new__(ours)
            LauncherError.__init__(err, exc.message, hint=exc.hint)  # type: ignore[attr-defined]
            if isinstance(err, UnknownNameError):
                err.kind, err.name = exc.kind, exc.name  # type: ignore[attr-defined]
            return err
    return LauncherError(getattr(exc, "message", str(exc)), hint=getattr(exc, "hint", None))
