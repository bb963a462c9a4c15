"""Planning a launch: rank every alternative's offers, pick one, check the budget.

    plan = make_plan(loaded)        # real catalog, credential detection, ledger spend
    plan.budget.enforce()           # BudgetExceededError (exit 3)
    print("\\n".join(plan_lines(plan)))
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from launcher.planning.budget import BudgetCheck, check_budget, default_project_budget
from launcher.planning.candidates import Candidate, Overrides, local_scored, rank_candidates
from launcher.planning.plan import Plan, build_plan, offer_label, plan_from_dict, plan_lines, plan_to_dict
from launcher.spec.loader import LoadedSpec
from pricing.models import Offer


def ledger_spend_lookup():
    """(project, since) -> spend, reading the ledger only if it already exists (a dry run must
    not create the database)."""
    from launcher import paths

    url = paths.db_url()
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        return lambda project, since: 0.0

    def spend(project, since):
        from launcher.ledger import Ledger

        with Ledger() as led:
            return led.project_spend_usd(project, since=since)

    return spend


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

    return build_plan(
        loaded,
        enabled=enabled,
        local_offer=local_offer,
        rank_cloud=rank_cloud,
        overrides=overrides,
        project_budget=project_budget if project_budget is not None else default_project_budget(),
        spend=spend if spend is not None else ledger_spend_lookup(),
    )


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
