"""The cloud account an attempt bills to, recorded with the attempt when it is provisioned (so
a cost export names it without asking the cloud again)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from launcher.ledger.records import NewAttempt
from launcher.providers.base import BillingAccounts


def with_billing_account(attempt: NewAttempt, provider: Any) -> NewAttempt:
    """`attempt` with the provider's billing account, when the provider can tell it (AWS: the
    STS caller's account; GCP: the project); unchanged otherwise (the local backend, or no
    credentials: reports then use a stable id derived from the ledger)."""
    if not isinstance(provider, BillingAccounts):
        return attempt
    ref = provider.billing_account()
    if ref is None:
        return attempt
    return replace(attempt, billing_account_id=ref.id, billing_account_name=ref.name)
