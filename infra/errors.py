"""The infra library's errors: readable message plus an optional hint.

`infra` is a library of its own and knows nothing of exit codes; `launcher.errors` maps these
classes to the CLI's exit codes in one table.
"""

from __future__ import annotations


class InfraError(Exception):
    """Base of every expected infra error."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InfraInputError(InfraError):
    """A malformed cluster spec, tag set, name or backend URL."""


class StackBusyError(InfraError):
    """Another process is updating the stack."""


class StackNotFoundError(InfraError):
    """No such Pulumi stack in the backend."""


class InfraProviderError(InfraError):
    """Pulumi or the cloud failed."""


class ToolMissingError(InfraProviderError):
    """The Pulumi CLI is needed and absent."""
