"""The one error hierarchy. The CLI catches `LauncherError` once and maps it to an exit code.

The libraries `pricing` and `infra` raise their own errors (`pricing.errors`, `infra.errors`);
`as_launcher_error` turns one into the LauncherError of the same kind (the table below is the
only place that knows which exit code each library error means).

Every error carries a readable message (and optionally a hint such as "did you mean ...").
Anything that is not a LauncherError is a bug: the CLI prints it briefly (full traceback with
--debug) and exits with INTERNAL.
"""

from __future__ import annotations

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


class ToolMissingError(ProviderError):
    """An external tool (Pulumi CLI, podman, ...) is needed and absent."""


class ConflictError(LauncherError):
    exit_code = ExitCode.CONFLICT


class NotFoundError(LauncherError):
    exit_code = ExitCode.NOT_FOUND


class JobFailedError(LauncherError):
    exit_code = ExitCode.JOB_FAILED


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
