"""Planning a launch: rank every alternative's offers, pick one, check the budget.

    plan = make_plan(loaded)        # real catalog, credential detection, ledger spend
    plan.budget.enforce()           # BudgetExceededError (exit 3)
    print("\\n".join(plan_lines(plan)))
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from launcher.planning.budget import BudgetCheck, check_budget, org_budget_check
from launcher.planning.candidates import Candidate, Overrides, local_scored, rank_candidates
from launcher.planning.plan import Plan, build_plan, offer_label, plan_from_dict, plan_lines, plan_to_dict
from launcher.spec.loader import LoadedSpec
from pricing.models import Offer


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def _existing_ledger():
    """The ledger if it exists already (a dry run must not create the database), else None."""
    from launcher import paths

    url = paths.db_url()
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        return None
    from launcher.ledger import Ledger

    return Ledger()


def make_plan(
    loaded: LoadedSpec,
    *,
    overrides: Overrides = Overrides(),
    catalog_dir: Path | None = None,
    local_offer: Offer | None = None,
    enabled: Mapping[str, bool] | None = None,
    project_budget=None,
    spend=None,
) -> Plan:
    """The real wiring: providers.detect for credentials, pricing for the catalog ranking."""
    if enabled is None:
        from launcher.providers.detect import enabled_clouds

        enabled = {c: s.enabled for c, s in enabled_clouds().items()}
    enabled = {**enabled, "local": True}
    if local_offer is None:
        from launcher.providers.local import LocalProvider

        local_offer = LocalProvider().offer()
    catalog = {}

    def rank_cloud(query):
        from pricing.catalog import load_catalog
        from pricing.rank import rank_offers

        if "c" not in catalog:
            catalog["c"] = load_catalog(catalog_dir)
        known = set(catalog["c"].clouds)
        clouds = tuple(c for c in (query.clouds or ()) if c in known)
        if not clouds:
            from launcher.errors import NoOfferError

            raise NoOfferError(f"the catalog has no prices for {', '.join(query.clouds or ())}")
        from dataclasses import replace

        return rank_offers(catalog["c"], replace(query, clouds=clouds))

    plan = build_plan(
        loaded,
        enabled=enabled,
        local_offer=local_offer,
        rank_cloud=rank_cloud,
        overrides=overrides,
        project_budget=project_budget,
        spend=spend,
    )
    if project_budget is None and spend is None:
        plan = _with_org_budgets(plan, loaded)
    return plan


def _with_org_budgets(plan: Plan, loaded: LoadedSpec) -> Plan:
    """Apply budgets.yaml (monthly/burn limits per project and owner) to the plan's budget."""
    from dataclasses import replace

    lb = loaded.spec.launcher
    owner = lb.owner or _user()  # the run is recorded with this owner too
    try:
        from launcher.budgets import load_budgets

        if not load_budgets().matching(lb.project, owner):
            return plan  # no budget applies: skip opening the ledger
    except ImportError:
        return plan
    ledger = _existing_ledger()
    try:
        price = plan.chosen.scored.offer.price_usd_per_hour * plan.num_nodes
        check = org_budget_check(ledger, lb.project, owner, plan.expected_cost_usd, price)
    finally:
        if ledger is not None:
            ledger.close()
    if check is None:
        return plan
    summary = check.summary() if check.remaining_usd is not None or check.burn_limit_usd_per_hour is not None else None
    budget = replace(plan.budget, project_refusal=None if check.ok else check.reason, project_summary=summary)
    return replace(plan, budget=budget)


__all__ = [
    "BudgetCheck",
    "Candidate",
    "Overrides",
    "Plan",
    "build_plan",
    "check_budget",
    "local_scored",
    "make_plan",
    "offer_label",
    "plan_from_dict",
    "plan_lines",
    "plan_to_dict",
    "rank_candidates",
]
