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
class Plan:
    name: str
    num_nodes: int
    candidates: tuple[Candidate, ...]  # best first; [0] is chosen
    ordered: bool
    gpu_requested: bool
    work_hours: float
    budget: BudgetCheck
    notes: tuple[str, ...] = field(default_factory=tuple)  # alternatives that produced nothing

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
) -> Plan:
    """Rank and budget-check (does not refuse: call `plan.budget.enforce()`)."""
    spec = loaded.spec
    cands, notes = rank_candidates(
        loaded, enabled=enabled, local_offer=local_offer, rank_cloud=rank_cloud, overrides=overrides
    )
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
        market = "simulated spot" if o.spot else "free"
        return f"local (this machine, {o.vcpus or 1:g} CPUs, no GPU, {market}, $0/h)"
    where = "/".join(p for p in (o.cloud, o.region, o.zone) if p)
    gpu = f"{o.accelerator}:{o.accelerator_count}" if o.accelerator else "CPU"
    market = "spot" if o.spot else "on-demand"
    return f"{where} {o.instance_type} ({gpu}, {market}, ${o.price_usd_per_hour:.4g}/h)"


def plan_lines(plan: Plan) -> list[str]:
    c = plan.chosen.scored
    lines = [
        f"Plan for {plan.name!r} ({plan.num_nodes} node{'s' if plan.num_nodes > 1 else ''}):",
        f"  chosen:   {offer_label(c.offer)}",
        f"  expected: ${plan.expected_cost_usd:,.2f} over {plan.expected_hours:.2f} h "
        f"(work {plan.work_hours:g} h; interruption risk {c.interruption_band})",
    ]
    if c.offer.cloud == "local" and plan.gpu_requested:
        lines.append("  note:     runs on this machine's CPU (no enabled cloud offers the requested GPU)")
    for fb in plan.fallbacks[:MAX_FALLBACKS_SHOWN]:
        s = fb.scored
        lines.append(f"  fallback: {offer_label(s.offer)}  ~${s.expected_cost_usd * plan.num_nodes:,.2f}")
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
    )


def plan_json_path(run_dir: Path) -> Path:
    return run_dir / "plan.json"
