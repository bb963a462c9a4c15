"""Budget check before anything is provisioned: the plan's expected cost against the spec's
`budget_usd` and the project's remaining monthly budget.

The monthly budget per project comes from a lookup hook (the budgets config is its own issue);
the month's spend comes from the ledger. Both are injectable, so this module is pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from launcher.errors import BudgetExceededError

ProjectBudgetLookup = Callable[[str], float | None]  # project -> monthly budget (USD) or None
SpendLookup = Callable[[str, datetime], float]  # (project, since) -> USD spent


@dataclass(frozen=True)
class BudgetCheck:
    expected_cost_usd: float
    run_budget_usd: float | None
    project: str
    project_budget_usd: float | None = None
    project_spent_usd: float | None = None  # this month, when a project budget exists
    project_refusal: str | None = None  # from launcher.budgets (monthly and burn limits)
    project_summary: str | None = None  # e.g. "$120.00 left this month (vision)"

    @property
    def project_remaining_usd(self) -> float | None:
        if self.project_budget_usd is None:
            return None
        return self.project_budget_usd - (self.project_spent_usd or 0.0)

    def refusal(self) -> str | None:
        if self.run_budget_usd is not None and self.expected_cost_usd > self.run_budget_usd:
            return (
                f"expected cost ${self.expected_cost_usd:,.2f} exceeds the task's budget_usd "
                f"${self.run_budget_usd:,.2f}"
            )
        if self.project_refusal:
            return self.project_refusal
        rem = self.project_remaining_usd
        if rem is not None and self.expected_cost_usd > rem:
            return (
                f"expected cost ${self.expected_cost_usd:,.2f} exceeds project {self.project!r}'s remaining "
                f"monthly budget ${max(rem, 0.0):,.2f} (budget ${self.project_budget_usd:,.2f}, "
                f"spent ${self.project_spent_usd or 0.0:,.2f})"
            )
        return None

    def enforce(self) -> None:
        why = self.refusal()
        if why:
            raise BudgetExceededError(
                f"refused: {why}", hint="raise the budget, pick a cheaper alternative, or lower expected_hours"
            )


def month_start(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def check_budget(
    expected_cost_usd: float,
    *,
    run_budget_usd: float | None,
    project: str,
    project_budget: ProjectBudgetLookup | None = None,
    spend: SpendLookup | None = None,
    now: datetime | None = None,
) -> BudgetCheck:
    monthly = project_budget(project) if project_budget else None
    spent = None
    if monthly is not None:
        spent = spend(project, month_start(now or datetime.now(UTC))) if spend else 0.0
    return BudgetCheck(expected_cost_usd, run_budget_usd, project, monthly, spent)


def org_budget_check(ledger, project: str, owner: str | None, expected_cost_usd: float, price_usd_per_hour: float,
                     now: datetime | None = None):
    """`launcher.budgets.check_plan` (budgets.yaml: monthly and burn limits per project/owner),
    or None when that module is absent. `ledger` may be None (no ledger yet: nothing spent)."""
    try:
        from launcher import budgets
    except ImportError:
        return None
    return budgets.check_plan(ledger or _NoSpend(), project, owner, expected_cost_usd, price_usd_per_hour, now or datetime.now(UTC))


class _NoSpend:
    """Stands in for a ledger that does not exist yet (a dry run must not create it)."""

    def spend_usd(self, **kw) -> float:
        return 0.0

    def project_spend_usd(self, *a, **kw) -> float:
        return 0.0

    def owner_spend_usd(self, *a, **kw) -> float:
        return 0.0

    def burn_rate_usd_per_hour(self, **kw) -> float:
        return 0.0
