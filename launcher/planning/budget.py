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
    project_budget_usd: float | None
    project_spent_usd: float | None  # this month, when a project budget exists

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


def default_project_budget() -> ProjectBudgetLookup | None:
    """The budgets config's lookup when that module exists (issue 7), else None."""
    try:
        from launcher import budgets  # type: ignore[attr-defined]
    except ImportError:
        return None
    fn = getattr(budgets, "monthly_budget_usd", None)
    return fn if callable(fn) else None
