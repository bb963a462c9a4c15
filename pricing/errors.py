"""The pricing library's errors: readable message plus an optional hint ("did you mean ...").

`pricing` is a library of its own and knows nothing of exit codes; `launcher.errors` maps these
classes to the CLI's exit codes in one table.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PricingError(Exception):
    """Base of every expected pricing error."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class PricingInputError(PricingError):
    """Malformed input: a GPU shape, a catalog file, a risk file, a query."""


class UnknownNameError(PricingInputError):
    """An unknown GPU, cloud or region, with suggestions."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, extra: str = "") -> None:
        known = sorted(set(known))
        super().__init__(f"unknown {kind} {name!r}{extra}", hint=did_you_mean(name, known))
        self.kind = kind
        self.name = name


class NoOfferError(PricingInputError):
    """Filters leave no offer."""


class PricingCredentialsError(PricingError):
    """A cloud price API needs credentials that are absent."""


class PricingSourceError(PricingError):
    """A cloud price API call failed."""


class PricingBusyError(PricingError):
    """Another process holds the catalog cache's lock."""


def did_you_mean(name: str, known: Iterable[str], n: int = 3) -> str | None:
    """A 'did you mean' hint, case-insensitive, or None when nothing is close."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    if not matches:
        return None
    return "did you mean " + " or ".join(repr(lowered[m]) for m in matches) + "?"
