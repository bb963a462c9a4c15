"""The one error hierarchy. The CLI catches `LauncherError` once and maps it to an exit code.

Every error carries a readable message (and optionally a hint such as "did you mean ...").
Anything that is not a LauncherError is a bug: the CLI prints it briefly (full traceback with
--debug) and exits with INTERNAL.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import IntEnum


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


class ToolMissingError(ProviderError):
    """An external tool (Pulumi CLI, podman, ...) is needed and absent."""


class ConflictError(LauncherError):
    exit_code = ExitCode.CONFLICT


class NotFoundError(LauncherError):
    exit_code = ExitCode.NOT_FOUND


class JobFailedError(LauncherError):
    exit_code = ExitCode.JOB_FAILED


def did_you_mean(name: str, known: Iterable[str], n: int = 3) -> str | None:
    """A 'did you mean' hint, case-insensitive, or None when nothing is close."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    if not matches:
        return None
    return "did you mean " + " or ".join(repr(lowered[m]) for m in matches) + "?"
