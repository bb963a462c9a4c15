"""Planning a launch with the real catalog, credential detection and ledger spend.

    plan = make_plan(loaded)        # real catalog, credential detection, ledger spend
    plan.budget.enforce()           # BudgetExceededError (exit 3)
    print("\\n".join(plan_lines(plan)))
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from launcher.planning.budget import org_budget_check
from launcher.planning.candidates import Overrides, priced_only_text
from launcher.planning.plan import CloudAccess, Plan, build_plan
from launcher.errors import CredentialsError, LauncherError, NoOfferError
from launcher.providers.base import CredentialStatus
from launcher.spec.loader import LoadedSpec
from pricing.clouds import PRICED_ONLY_CLOUDS
from pricing.models import Offer


def _user() -> str:
    from launcher.planning.tags import user_name

    return user_name()


def local_offer(*, simulated: bool, simulate_price: str | None = None) -> Offer:
    """The local offer as the controller's provider will describe it: spot when preemptions are
    simulated, at `simulate_price` ('SPOT[,ON_DEMAND]' USD/h) when given."""
    from launcher.providers.local import LocalProvider, PreemptionSchedule, SimulatedPrices

    prices = SimulatedPrices.parse(simulate_price) if simulate_price else None
    return LocalProvider(PreemptionSchedule((1.0,)) if simulated else None, prices=prices).offer()


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
    local_zones: tuple[str, ...] = (),
    enabled: Mapping[str, bool] | None = None,
    statuses: Mapping[str, CredentialStatus] | None = None,
    project_budget=None,
    spend=None,
    dry_run: bool = False,
) -> Plan:
    """The real wiring: providers.detect for credentials, pricing for the catalog ranking.

    A cloud forced with `--cloud` (overrides.clouds) that has no credentials: a real launch
    refuses (CredentialsError, exit 4, saying where we looked) unless another forced choice
    remains; a dry run ranks its offers anyway and the plan marks them (Plan.credentials).
    `statuses` (per cloud, from providers.detect) are looked up when `enabled` is not given.
    """
    from launcher.planning.declared import declared_statuses
    from launcher.planning.offers import OffersQuery, load_declared, offers

    declared = load_declared()
    declared_on = declared_statuses(declared)
    if enabled is None:
        if statuses is None:
            from launcher.providers.detect import enabled_clouds

            statuses = enabled_clouds()
        statuses = {**statuses, **declared_on}
        enabled = {c: s.enabled for c, s in statuses.items()}
    enabled = {**enabled, "local": True}
    found = dict(enabled)  # before a dry run pretends forced clouds are enabled
    forced = tuple(c for c in (overrides.clouds or ()) if c != "local")
    priced_only = [c for c in forced if c in PRICED_ONLY_CLOUDS]
    if priced_only and len(priced_only) == len(forced) and "local" not in (overrides.clouds or ()):
        raise NoOfferError(f"no offer: --cloud {','.join(priced_only)}: "
                           + "; ".join(priced_only_text(c) for c in priced_only))  # fmt: skip
    forced = tuple(c for c in forced if c not in PRICED_ONLY_CLOUDS)
    forced_off = [c for c in forced if not enabled.get(c)]
    if forced_off and dry_run:
        enabled.update({c: True for c in forced_off})  # show what a launch would do with credentials
    elif forced_off and len(forced_off) == len(forced) and "local" not in (overrides.clouds or ()):
        where = "; ".join(f"{c}: {_looked(c, statuses)}" for c in forced_off)
        raise CredentialsError(
            f"no offer: --cloud {','.join(forced_off)} has no credentials ({where})",
            hint=f"set up credentials for {' or '.join(forced_off)}, or see the plan without them: "
            f"launch SPEC --cloud {','.join(forced_off)} --dry-run",
        )
    if local_offer is None:
        from launcher.providers.local import LocalProvider

        local_offer = LocalProvider().offer()

    def ranker(query):
        return offers(OffersQuery(filters=query, catalog_dir=catalog_dir, launch=True, declared=declared)).scored

    def plan_with(usable: Mapping[str, bool]) -> Plan:
        return build_plan(
            loaded, enabled=usable, local_offer=local_offer, rank_cloud=ranker, overrides=overrides,
            project_budget=project_budget, spend=spend, local_zones=local_zones,
        )  # fmt: skip

    try:
        try:
            plan = plan_with(enabled)
        except CredentialsError:
            # A dry run never needs credentials, whichever way the cloud is named (--cloud or the
            # spec's infra): when only clouds without credentials could run it, show their plan.
            named = {a.placement().cloud for a in loaded.spec.resources.alternatives()}
            named_off = {c for c in named if c and c != "local" and not enabled.get(c) and c not in declared_on}
            if not dry_run or not named_off:
                raise
            plan = plan_with({**enabled, **{c: True for c in named_off}})
    except LauncherError as e:
        why = [s.source for k, s in declared_on.items() if not s.enabled and k in e.message]
        if why:
            e.message = f"{e.message} ({'; '.join(why)})"
        raise
    plan = _with_credentials(plan, loaded, overrides, found, statuses)
    if project_budget is None and spend is None:
        plan = _with_org_budgets(plan, loaded)
    return plan


def _looked(cloud: str, statuses: Mapping[str, CredentialStatus] | None) -> str:
    st = (statuses or {}).get(cloud)
    if st is None:
        return "not enabled"
    if st.enabled:
        return st.source
    from launcher.providers.detect import where_looked

    return where_looked(st)


def _with_credentials(plan: Plan, loaded: LoadedSpec, overrides: Overrides, found: Mapping[str, bool], statuses) -> Plan:
    """Record, for every cloud the plan considered (forced, named by the spec, or offering), whether
    credentials were found and where (or where we looked)."""
    from dataclasses import replace

    allowed = overrides.clouds
    named = [a.placement().cloud for a in loaded.spec.resources.alternatives()]
    considered: list[str] = []
    for c in (*(allowed or ()), *named, *(c.scored.offer.cloud for c in plan.candidates)):
        if c and c != "local" and (allowed is None or c in allowed) and c not in considered:
            considered.append(c)
    access = []
    for c in considered:
        on = bool(found.get(c))
        source = _looked(c, statuses) if statuses is not None else ("enabled by the caller" if on else "not enabled")
        access.append(CloudAccess(c, on, source))
    return replace(plan, credentials=tuple(access))


def _with_org_budgets(plan: Plan, loaded: LoadedSpec) -> Plan:
    """Apply budgets.yaml (monthly/burn limits per project and owner) to the plan's budget."""
    from dataclasses import replace

    lb = loaded.spec.launcher
    owner = lb.owner or _user()  # the run is recorded with this owner too
    from launcher.planning.budget import load_budgets

    if not load_budgets().matching(lb.project, owner):
        return plan  # no budget applies: skip opening the ledger
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


