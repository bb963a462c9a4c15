"""Planning a launch: rank every alternative's offers, pick one, check the budget.

    plan = make_plan(loaded)        # real catalog, credential detection, ledger spend
    plan.budget.enforce()           # BudgetExceededError (exit 3)
    print("\\n".join(plan_lines(plan)))

The names below live in their modules (planner, plan, candidates, budget, offers); they are
imported on first use, so `launcher offers` loads the offers service alone. The service
itself is `launcher.planning.offers.offers` (the module keeps the name `offers`).
"""

from __future__ import annotations

import importlib

_HOMES = {
    "BudgetCheck": "budget",
    "check_budget": "budget",
    "Candidate": "candidates",
    "Overrides": "candidates",
    "local_scored": "candidates",
    "rank_candidates": "candidates",
    "CloudAccess": "plan",
    "Plan": "plan",
    "build_plan": "plan",
    "expected_parts": "plan",
    "offer_label": "plan",
    "plan_from_dict": "plan",
    "plan_lines": "plan",
    "plan_to_dict": "plan",
    "local_offer": "planner",
    "make_plan": "planner",
    "OffersQuery": "offers",
    "OffersResult": "offers",
    "OfferRow": "offers",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
