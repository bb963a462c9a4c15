"""The plan: chosen offer, fallbacks, expected cost and hours, budget. Pure given its inputs;
`make_plan` wires in the real catalog, credential detection and ledger spend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from launcher.planning.budget import BudgetCheck, ProjectBudgetLookup, SpendLookup, check_budget
from launcher.planning.candidates import Candidate, Overrides, expected_work_hours, rank_candidates
from launcher.spec.loader import LoadedSpec
from pricing.models import Offer, ScoredOffer

MAX_FALLBACKS_SHOWN = 5


@dataclass(frozen=True)
class CloudAccess:
    """Whether a cloud the plan considered has credentials, and where they were found (or where
    we looked). A dry run may rank a cloud without credentials (`enabled=False`) to show what a
    launch would do once they exist; a real launch never does."""

    cloud: str
    enabled: bool
    source: str


@dataclass(frozen=True)
class Plan:
    name: str
    num_nodes: int
    candidates: tuple[Candidate, ...]  # best first; [0] is chosen
    ordered: bool
    gpu_requested: bool
    work_hours: float
    budget: BudgetCheck
    notes: tuple[str, ...] = field(default_factory=tuple)  # alternatives that produced nothing
    credentials: tuple[CloudAccess, ...] = field(default_factory=tuple)  # clouds considered, by name

    @property
    def chosen(self) -> Candidate:
        return self.candidates[0]

    @property
    def fallbacks(self) -> tuple[Candidate, ...]:
        return self.candidates[1:]

    @property
    def ranked(self) -> tuple[ScoredOffer, ...]:
        return tuple(c.scored for c in self.candidates)

    @property
    def expected_cost_usd(self) -> float:
        return self.chosen.scored.expected_cost_usd * self.num_nodes

    @property
    def expected_hours(self) -> float:
        return self.chosen.scored.expected_hours

    def access(self, cloud: str) -> CloudAccess | None:
        return next((a for a in self.credentials if a.cloud == cloud), None)

    @property
    def clouds_without_credentials(self) -> tuple[str, ...]:
        """Clouds whose offers are in the plan although no credentials were found (dry runs)."""
        in_plan = {c.scored.offer.cloud for c in self.candidates}
        return tuple(a.cloud for a in self.credentials if not a.enabled and a.cloud in in_plan)

    @property
    def launchable(self) -> tuple[Candidate, ...]:
        """The candidates a real launch may use (a dry run can hold more)."""
        off = set(self.clouds_without_credentials)
        return tuple(c for c in self.candidates if c.scored.offer.cloud not in off)


def build_plan(
    loaded: LoadedSpec,
    *,
    enabled: Mapping[str, bool],
    local_offer: Offer,
    rank_cloud,
    overrides: Overrides = Overrides(),
    project_budget: ProjectBudgetLookup | None = None,
    spend: SpendLookup | None = None,
    now: datetime | None = None,
    local_zones: tuple[str, ...] = (),
) -> Plan:
    """Rank and budget-check (does not refuse: call `plan.budget.enforce()`). `local_zones`: the
    local backend's simulated spot zones (one local spot offer each)."""
    spec = loaded.spec
    cands, notes = rank_candidates(
        loaded, enabled=enabled, local_offer=local_offer, rank_cloud=rank_cloud, overrides=overrides,
        local_zones=local_zones,
    )  # fmt: skip
    cost = cands[0].scored.expected_cost_usd * spec.num_nodes
    budget = check_budget(
        cost,
        run_budget_usd=spec.launcher.budget_usd,
        project=spec.launcher.project,
        project_budget=project_budget,
        spend=spend,
        now=now,
    )
    return Plan(
        name=spec.display_name,
        num_nodes=spec.num_nodes,
        candidates=tuple(cands),
        ordered=spec.resources.is_ordered,
        gpu_requested=spec.wants_gpu,
        work_hours=expected_work_hours(loaded),
        budget=budget,
        notes=tuple(notes),
    )


# ---- text -------------------------------------------------------------------------------------


def offer_label(o: Offer) -> str:
    if o.cloud == "local":
        market = "simulated spot" if o.spot else ("simulated on-demand" if o.price_usd_per_hour else "free")
        zone = f"/{o.zone}" if o.zone else ""  # a simulated spot zone (--simulate-trace per zone)
        return f"local{zone} (this machine, {o.vcpus or 1:g} CPUs, no GPU, {market}, ${o.price_usd_per_hour:.4g}/h)"
    where = "/".join(p for p in (o.cloud, o.region, o.zone) if p)
    gpu = f"{o.accelerator}:{o.accelerator_count}" if o.accelerator else "CPU"
    market = "spot" if o.spot else "on-demand"
    return f"{where} {o.instance_type} ({gpu}, {market}, ${o.price_usd_per_hour:.4g}/h)"


def expected_parts(s: ScoredOffer) -> str:
    """Where the expected hours go, e.g. 'work 0.5 h + checkpoints 0.50 h (every 1 min)'."""
    p = s.parts or {}
    work = p.get("work_hours")
    if work is None:
        return ""
    bits = [f"work {work:g} h"]
    ckpt = p.get("checkpoint_hours", 0.0)
    if ckpt >= 0.005:
        every = f" (every {s.checkpoint_minutes:g} min)" if s.checkpoint_minutes else ""
        bits.append(f"checkpoints {ckpt:.2f} h{every}")
    lost = p.get("lost_work_hours", 0.0) + p.get("restart_hours", 0.0)
    if lost >= 0.005:
        bits.append(f"interruptions {lost:.2f} h")
    return " + ".join(bits)


def _no_credentials_note(plan: Plan, cloud: str, forced: bool) -> str:
    access = plan.access(cloud)
    looked = access.source if access else "no credentials"
    if plan.launchable:
        consequence = "a real launch would skip its offers"
    else:
        consequence = "a real launch would refuse" if forced else "a real launch would find no offer"
    return f"{cloud}: no credentials found — {consequence}: {looked}"


def plan_lines(plan: Plan, *, forced_clouds: tuple[str, ...] | None = None) -> list[str]:
    c = plan.chosen.scored
    missing = set(plan.clouds_without_credentials)
    forced = bool(forced_clouds)
    chosen_line = f"  chosen:   {offer_label(c.offer)}"
    if c.offer.cloud in missing:
        chosen_line += "  [no credentials]"
    parts = expected_parts(c)
    lines = [
        f"Plan for {plan.name!r} ({plan.num_nodes} node{'s' if plan.num_nodes > 1 else ''}):",
        chosen_line,
        f"  expected: ${plan.expected_cost_usd:,.2f} over {plan.expected_hours:.2f} h "
        f"({parts or f'work {plan.work_hours:g} h'}; interruption risk {c.interruption_band})",
    ]
    if c.offer.cloud == "local" and plan.gpu_requested:
        lines.append("  note:     runs on this machine's CPU (no enabled cloud offers the requested GPU)")
    for fb in plan.fallbacks[:MAX_FALLBACKS_SHOWN]:
        s = fb.scored
        mark = "  [no credentials]" if s.offer.cloud in missing else ""
        lines.append(f"  fallback: {offer_label(s.offer)}  ~${s.expected_cost_usd * plan.num_nodes:,.2f}{mark}")
    if len(plan.fallbacks) > MAX_FALLBACKS_SHOWN:
        lines.append(f"  ... and {len(plan.fallbacks) - MAX_FALLBACKS_SHOWN} more fallbacks")
    b = plan.budget
    budget_bits = []
    if b.run_budget_usd is not None:
        budget_bits.append(f"task budget ${b.run_budget_usd:,.2f}")
    if b.project_summary:
        budget_bits.append(f"project {b.project!r}: {b.project_summary}")
    elif b.project_remaining_usd is not None:
        budget_bits.append(f"project {b.project!r} has ${b.project_remaining_usd:,.2f} left this month")
    lines.append("  budget:   " + ("; ".join(budget_bits) if budget_bits else "no budget set"))
    for a in plan.credentials:
        if a.cloud in missing:
            lines.append(f"  credentials: {_no_credentials_note(plan, a.cloud, forced)}")
        elif a.enabled:
            lines.append(f"  credentials: {a.cloud}: found in {a.source}")
        else:
            lines.append(f"  credentials: {a.cloud}: none found ({a.source})")
    for n in plan.notes:
        lines.append(f"  skipped:  {n}")
    return lines


# ---- persistence (the run directory keeps the plan, so a resumed controller uses it) ----------


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "name": plan.name,
        "num_nodes": plan.num_nodes,
        "ordered": plan.ordered,
        "gpu_requested": plan.gpu_requested,
        "work_hours": plan.work_hours,
        "budget": asdict(plan.budget),
        "notes": list(plan.notes),
        "credentials": [asdict(a) for a in plan.credentials],
        "candidates": [{"alternative": c.alternative, "scored": asdict(c.scored)} for c in plan.candidates],
    }


def plan_from_dict(d: Mapping[str, Any]) -> Plan:
    cands = []
    for c in d["candidates"]:
        s = dict(c["scored"])
        s["offer"] = Offer(**s["offer"])
        cands.append(Candidate(ScoredOffer(**s), int(c["alternative"])))
    return Plan(
        name=d["name"],
        num_nodes=int(d["num_nodes"]),
        candidates=tuple(cands),
        ordered=bool(d["ordered"]),
        gpu_requested=bool(d["gpu_requested"]),
        work_hours=float(d["work_hours"]),
        budget=BudgetCheck(**d["budget"]),
        notes=tuple(d.get("notes", ())),
        credentials=tuple(CloudAccess(**a) for a in d.get("credentials", ())),
    )


def plan_json_path(run_dir: Path) -> Path:
    return run_dir / "plan.json"
