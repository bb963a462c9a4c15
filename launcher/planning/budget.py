"""Budgets: the checks a plan passes before anything is provisioned, and the limits the
controller enforces while a run runs. One module for every budget concept.

Per plan (`check_budget`, `BudgetCheck`): the plan's expected cost against the spec's
`budget_usd` and the project's remaining monthly budget (lookups injectable, so it is pure).

Per project (optionally per project and owner): a monthly limit and an hourly burn limit, in
`$LAUNCHER_HOME/budgets.yaml`:

    budgets:
      - project: vision
        monthly_limit_usd: 2000
        hourly_burn_limit_usd_per_hour: 40
      - project: vision
        owner: alice
        monthly_limit_usd: 500
        stop_runs_at_limit: true   # default: the controller stops runs once the month is spent

Spend is the ledger's compute spend (`Ledger.spend_usd`, counted as reports count it:
launcher.ledger.attempt_cost) in the calendar month (UTC) of `now`. A run matches a
project budget by project, and a project+owner budget when the owner matches too; every
matching budget must allow a plan.

- `check_plan(...)` is called by `launch` before anything is provisioned (refuse when the
  expected cost exceeds what is left, or the new price would push the burn rate over its limit).
- `should_stop(ledger, run_id, now)` is polled by the controller: a reason string when the run
  crossed its own `budget_usd` or a matching budget's monthly limit (it then stops the run
  after a checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from launcher.cost.window import Window, month_start
from launcher.errors import BudgetExceededError
from launcher.money import usd
from launcher.paths import home

ProjectBudgetLookup = Callable[[str], float | None]  # project -> monthly budget (USD) or None
SpendLookup = Callable[[str, datetime], float]  # (project, since) -> USD spent


@dataclass(frozen=True)
class BudgetCheck:
    expected_cost_usd: float
    run_budget_usd: float | None
    project: str
    project_budget_usd: float | None = None
    project_spent_usd: float | None = None  # this month, when a project budget exists
    project_refusal: str | None = None  # from check_plan (budgets.yaml monthly and burn limits)
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
                     now: datetime | None = None) -> LimitCheck:
    """`check_plan` (budgets.yaml: monthly and burn limits per project/owner). `ledger` may be
    None (no ledger yet: nothing spent)."""
    return check_plan(ledger or _NoSpend(), project, owner, expected_cost_usd, price_usd_per_hour, now or datetime.now(UTC))


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


# ---- budgets.yaml: monthly and burn limits per project/owner ----------------------------
WARN_FRACTION = 0.8


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see config_file.defaults

    project: str = Field(min_length=1)
    owner: str | None = None
    monthly_limit_usd: float | None = Field(default=None, gt=0)
    hourly_burn_limit_usd_per_hour: float | None = Field(default=None, gt=0)
    stop_runs_at_limit: bool = True

    @model_validator(mode="after")
    def _has_a_limit(self) -> Budget:
        if self.monthly_limit_usd is None and self.hourly_burn_limit_usd_per_hour is None:
            raise ValueError("set monthly_limit_usd and/or hourly_burn_limit_usd_per_hour")
        return self

    @property
    def name(self) -> str:
        return f"{self.project}/{self.owner}" if self.owner else self.project

    def matches(self, project: str, owner: str | None) -> bool:
        return self.project == project and (self.owner is None or self.owner == owner)


class BudgetsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see config_file.defaults

    budgets: list[Budget] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> BudgetsConfig:
        seen: set[tuple[str, str | None]] = set()
        for b in self.budgets:
            key = (b.project, b.owner)
            if key in seen:
                raise ValueError(f"budget {b.name!r} is listed twice")
            seen.add(key)
        return self

    def matching(self, project: str, owner: str | None) -> list[Budget]:
        return [b for b in self.budgets if b.matches(project, owner)]


def budgets_path() -> Path:
    return home() / "budgets.yaml"


def load_budgets(path: Path | None = None) -> BudgetsConfig:
    """The budgets file, or no budgets when it does not exist. SpecError when malformed."""
    from launcher.config_file import load_yaml_model

    return load_yaml_model(path or budgets_path(), BudgetsConfig, missing_ok=True, what="budgets file")


def _spent(ledger: Any, b: Budget, now: datetime) -> float:
    month = Window.month_to(now)
    return float(ledger.spend_usd(project=b.project, owner=b.owner, since=month.since, until=month.until))


def _burn(ledger: Any, b: Budget) -> float:
    return float(ledger.burn_rate_usd_per_hour(project=b.project, owner=b.owner))


def remaining_usd(
    ledger: Any, project: str, owner: str | None, now: datetime, config: BudgetsConfig | None = None
) -> float | None:
    """What is left this month under every matching monthly limit (the smallest), or None
    when no matching budget has a monthly limit."""
    config = config if config is not None else load_budgets()
    left = [b.monthly_limit_usd - _spent(ledger, b, now) for b in config.matching(project, owner) if b.monthly_limit_usd]
    return min(left) if left else None


@dataclass(frozen=True)
class LimitCheck:
    ok: bool
    remaining_usd: float | None  # this month, under the tightest matching budget; None = no limit
    reason: str | None = None  # why not ok
    budget: str | None = None  # the budget that refused (or the tightest one)
    burn_usd_per_hour: float | None = None  # open attempts' current burn, with the tightest burn limit
    burn_limit_usd_per_hour: float | None = None

    def raise_if_refused(self) -> None:
        if not self.ok:
            raise BudgetExceededError(self.reason or "over budget", hint=self.summary())

    def summary(self) -> str:
        if self.remaining_usd is None and self.burn_limit_usd_per_hour is None:
            return "no budget applies"
        parts = []
        if self.remaining_usd is not None:
            parts.append(f"${max(0.0, self.remaining_usd):,.2f} left this month ({self.budget})")
        if self.burn_limit_usd_per_hour is not None:
            parts.append(f"burn ${self.burn_usd_per_hour or 0:,.2f}/h of ${self.burn_limit_usd_per_hour:,.2f}/h")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_plan(
    ledger: Any,
    project: str,
    owner: str | None,
    expected_cost_usd: float,
    price_usd_per_hour: float,
    now: datetime,
    config: BudgetsConfig | None = None,
) -> LimitCheck:
    """May a plan with this expected cost and hourly price (all nodes) start now?"""
    config = config if config is not None else load_budgets()
    matching = config.matching(project, owner)
    if not matching:
        return LimitCheck(ok=True, remaining_usd=None)
    tightest: tuple[float, Budget] | None = None
    burn: tuple[float, float, Budget] | None = None  # (headroom, current burn, budget)
    refusal: tuple[str, Budget] | None = None
    for b in matching:
        if b.monthly_limit_usd is not None:
            spent = _spent(ledger, b, now)
            left = b.monthly_limit_usd - spent
            if tightest is None or left < tightest[0]:
                tightest = (left, b)
            if expected_cost_usd > left and refusal is None:
                refusal = (
                    f"expected cost ${expected_cost_usd:,.2f} exceeds the ${max(0.0, left):,.2f} left in budget "
                    f"{b.name!r} (${b.monthly_limit_usd:,.2f}/month, {usd(spent, sign='$')} spent in {now:%Y-%m})",
                    b,
                )
        if b.hourly_burn_limit_usd_per_hour is not None:
            current = _burn(ledger, b)
            headroom = b.hourly_burn_limit_usd_per_hour - current
            if burn is None or headroom < burn[0]:
                burn = (headroom, current, b)
            if current + price_usd_per_hour > b.hourly_burn_limit_usd_per_hour and refusal is None:
                refusal = (
                    f"${price_usd_per_hour:,.2f}/h would raise budget {b.name!r}'s burn rate from "
                    f"${current:,.2f}/h over its ${b.hourly_burn_limit_usd_per_hour:,.2f}/h limit",
                    b,
                )
    named = refusal[1] if refusal else (tightest[1] if tightest else None)
    return LimitCheck(
        ok=refusal is None,
        remaining_usd=tightest[0] if tightest else None,
        reason=refusal[0] if refusal else None,
        budget=named.name if named else None,
        burn_usd_per_hour=burn[1] if burn else None,
        burn_limit_usd_per_hour=burn[2].hourly_burn_limit_usd_per_hour if burn else None,
    )


@dataclass(frozen=True)
class BudgetStatus:
    budget: str
    project: str
    owner: str | None
    month: str
    spent_usd: float
    monthly_limit_usd: float | None
    remaining_usd: float | None
    used_pct: float | None
    burn_usd_per_hour: float
    hourly_burn_limit_usd_per_hour: float | None
    state: str  # ok | warning (>= 80% used or burn at its limit) | exceeded

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def budget_status(ledger: Any, now: datetime, config: BudgetsConfig | None = None) -> list[BudgetStatus]:
    config = config if config is not None else load_budgets()
    out = []
    for b in config.budgets:
        spent = _spent(ledger, b, now)
        burn = _burn(ledger, b)
        limit = b.monthly_limit_usd
        used = 100.0 * spent / limit if limit else None
        state = "ok"
        if (limit and spent >= limit) or (b.hourly_burn_limit_usd_per_hour and burn > b.hourly_burn_limit_usd_per_hour):
            state = "exceeded"
        elif (limit and spent >= WARN_FRACTION * limit) or (
            b.hourly_burn_limit_usd_per_hour and burn >= b.hourly_burn_limit_usd_per_hour
        ):
            state = "warning"
        out.append(
            BudgetStatus(
                budget=b.name, project=b.project, owner=b.owner, month=f"{now:%Y-%m}", spent_usd=spent,
                monthly_limit_usd=limit, remaining_usd=(limit - spent) if limit else None, used_pct=used,
                burn_usd_per_hour=burn, hourly_burn_limit_usd_per_hour=b.hourly_burn_limit_usd_per_hour,
                state=state,
            )  # fmt: skip
        )
    return out


def should_stop(ledger: Any, run_id: str, now: datetime, config: BudgetsConfig | None = None) -> str | None:
    """Why the controller should stop this run now (after a checkpoint), or None.

    Hard limits: the run's own `budget_usd`, and the monthly limit of each matching budget
    with `stop_runs_at_limit`. Burn limits only refuse new plans; they never stop a run.
    """
    run = ledger.get_run(run_id)
    if run.is_terminal:
        return None
    if run.budget_usd is not None:
        spent = float(ledger.run_spend_usd(run_id))
        if spent >= run.budget_usd:
            return f"run {run_id} has spent {usd(spent, sign='$')} of its ${run.budget_usd:,.2f} budget"
    config = config if config is not None else load_budgets()
    for b in config.matching(run.project, run.owner):
        if b.monthly_limit_usd is None or not b.stop_runs_at_limit:
            continue
        spent = _spent(ledger, b, now)
        if spent >= b.monthly_limit_usd:
            return (
                f"budget {b.name!r} is spent: {usd(spent, sign='$')} of ${b.monthly_limit_usd:,.2f} in {now:%Y-%m}"
            )
    return None
