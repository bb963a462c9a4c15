"""Cases for `launcher simulate`: a JSON list of jobs, each against one trace (or several zones).

Validated at the boundary (pydantic, unknown fields refused); every problem becomes one
BadInputError naming the case, before anything is simulated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from launcher.errors import BadInputError
from launcher.policies.base import PlacementPolicy
from launcher.simulation.engine import SimCase, SimResult, deadline_ticks, simulate
from launcher.simulation.traces import Trace, load_trace, read_json


# Longer than any trace (a century): a bound so that no count of ticks overflows.
MAX_HOURS = 1e6


class CaseSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    trace: str | None = None
    traces: list[str] | None = Field(default=None, min_length=1)
    start_tick: int = Field(default=0, ge=0)
    work_hours: float = Field(gt=0, le=MAX_HOURS)
    deadline_hours: float = Field(gt=0, le=MAX_HOURS)
    overhead_hours: float = Field(ge=0, le=MAX_HOURS)
    on_demand_price: float = Field(ge=0)
    spot_price: float = Field(ge=0)
    # hours of each trace before start_tick the launcher had watched: what the policy starts from
    # (as the controller starts from what other runs saw); at most what lies before start_tick
    history_hours: float = Field(default=0, ge=0, le=MAX_HOURS)

    @model_validator(mode="after")
    def _one_trace_field(self) -> CaseSpec:
        if (self.trace is None) == (self.traces is None):
            raise ValueError("give exactly one of 'trace' (one zone) or 'traces' (a list of zones)")
        return self

    @property
    def trace_paths(self) -> list[str]:
        return [self.trace] if self.trace is not None else list(self.traces or [])


def _pydantic_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "case"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def parse_cases(obj: object, source: str = "cases") -> list[CaseSpec]:
    if not isinstance(obj, list):
        raise BadInputError(f"{source}: expected a JSON list of case objects, got {type(obj).__name__}")
    if not obj:
        raise BadInputError(f"{source}: the list of cases is empty")
    out = []
    for i, item in enumerate(obj):
        if not isinstance(item, dict):
            raise BadInputError(f"{source}: case {i} is not an object")
        try:
            out.append(CaseSpec.model_validate(item))
        except ValidationError as e:
            raise BadInputError(f"{source}: case {i}: {_pydantic_message(e)}") from None
    return out


def load_cases(path: Path) -> list[CaseSpec]:
    obj = read_json(path, "cases file")
    return parse_cases(obj, str(path))


class TraceStore:
    """Loads each trace file once; paths must stay under the trace root."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise BadInputError(f"trace root is not a directory: {root}")
        self.root = root.resolve()
        self._cache: dict[str, Trace] = {}

    def get(self, rel: str) -> Trace:
        if rel not in self._cache:
            path = (self.root / rel).resolve()
            if not path.is_relative_to(self.root):
                raise BadInputError(f"trace {rel!r} is outside the trace root {self.root}")
            self._cache[rel] = load_trace(path, rel)
        return self._cache[rel]


def build_case(spec: CaseSpec, store: TraceStore, index: int) -> SimCase:
    traces = tuple(store.get(p) for p in spec.trace_paths)
    gaps = {t.gap_seconds for t in traces}
    if len(gaps) > 1:
        raise BadInputError(f"case {index}: traces have different gap_seconds {sorted(gaps)}")
    n = min(len(t) for t in traces)
    if spec.start_tick >= n:
        raise BadInputError(f"case {index}: start_tick {spec.start_tick} is past the end of the trace ({n} ticks)")
    need = deadline_ticks(spec.deadline_hours, traces[0].gap_hours)
    if spec.start_tick + need > n:
        raise BadInputError(
            f"case {index}: the deadline ({need} ticks from start_tick {spec.start_tick}) runs past the end "
            f"of the trace ({n} ticks)",
            hint=f"use start_tick <= {max(0, n - need)} or a shorter deadline",
        )
    return SimCase(
        traces=traces,
        start_tick=spec.start_tick,
        work_hours=spec.work_hours,
        deadline_hours=spec.deadline_hours,
        overhead_hours=spec.overhead_hours,
        on_demand_price=spec.on_demand_price,
        spot_price=spec.spot_price,
        history_ticks=min(spec.start_tick, round(spec.history_hours / traces[0].gap_hours)),
    )


@dataclass(frozen=True)
class CaseOutcome:
    case: int
    policy: str
    zones: int
    cost: float
    finished: bool
    met_deadline: bool
    hours: float
    preemptions: int
    switches: int
    starts: int
    spot_hours: float
    on_demand_hours: float
    omniscient_cost: float | None = None
    refused: int | None = None  # probes refused (only without a capacity signal)

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("cost", "hours", "spot_hours", "on_demand_hours", "omniscient_cost"):
            if d[k] is not None:
                d[k] = round(d[k], 6)
        if self.omniscient_cost is None:
            d.pop("omniscient_cost")
        if self.refused is None:
            d.pop("refused")
        return d


def run_cases(
    specs: list[CaseSpec], trace_root: Path, policy: PlacementPolicy, *, with_optimum: bool = False,
    capacity_signal: bool = True,
) -> list[CaseOutcome]:
    """Validate every case first (traces exist, fit the deadline), then simulate them in order."""
    store = TraceStore(trace_root)
    cases = [build_case(s, store, i) for i, s in enumerate(specs)]
    out = []
    for i, case in enumerate(cases):
        r: SimResult = simulate(policy, case, capacity_signal=capacity_signal)
        opt = None
        if with_optimum:
            from launcher.simulation.omniscient import omniscient_cost

            opt = omniscient_cost(case, multi_zone=policy.multi_zone)
        out.append(
            CaseOutcome(
                case=i,
                policy=policy.name,
                zones=len(case.traces) if policy.multi_zone else 1,
                cost=r.cost,
                finished=r.finished,
                met_deadline=r.met_deadline,
                hours=r.hours,
                preemptions=r.preemptions,
                switches=r.switches,
                starts=r.starts,
                spot_hours=r.spot_hours,
                on_demand_hours=r.on_demand_hours,
                omniscient_cost=opt,
                refused=None if capacity_signal else r.refused,
            )
        )
    return out
