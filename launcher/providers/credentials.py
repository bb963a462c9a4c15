"""Whether a cloud's credentials were found, and where (kept apart from the provider interface so
that `launcher offers` can mark enabled clouds without loading it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CredentialStatus:
    provider: str
    enabled: bool
    source: str  # where the credentials were found, or why none were
    account: str | None = None
