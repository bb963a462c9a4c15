"""Small builders for policy and simulator tests: hand-written traces and scripted policies."""

from __future__ import annotations

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.simulation.engine import SimCase
from launcher.simulation.traces import Trace

HOUR = 3600.0


def trace(pattern: str, gap_seconds: float = HOUR, name: str = "t") -> Trace:
    """'0' = spot available, '1' = no spot capacity (the trace files' convention)."""
    return Trace(name=name, gap_seconds=gap_seconds, available=tuple(c == "0" for c in pattern))


def case(*patterns: str, work: float, deadline: float, overhead: float, od: float = 3.0, spot: float = 1.0,
         start: int = 0, gap_seconds: float = HOUR) -> SimCase:
    return SimCase(
        traces=tuple(trace(p, gap_seconds, f"z{i}") for i, p in enumerate(patterns)),
        start_tick=start,
        work_hours=work,
        deadline_hours=deadline,
        overhead_hours=overhead,
        on_demand_price=od,
        spot_price=spot,
    )


S, D, N = Choice.SPOT, Choice.ON_DEMAND, Choice.NONE


class Scripted(PlacementPolicy):
    """Plays a fixed list of (choice, zone) per tick and records every state it was shown."""

    name = "scripted"

    def __init__(self, script, multi_zone: bool = False) -> None:
        self.script = [c if isinstance(c, tuple) else (c, 0) for c in script]
        self.multi_zone = multi_zone
        self.seen: list[DecisionState] = []

    def reset(self) -> None:
        self.seen = []

    def decide(self, state: DecisionState) -> Decision:
        choice, zone = self.script[len(self.seen)]
        self.seen.append(state)
        return Decision(choice, zone)


class Recording(PlacementPolicy):
    """Wraps a policy and records (state, decision) per tick."""

    def __init__(self, inner: PlacementPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.multi_zone = inner.multi_zone
        self.log: list[tuple[DecisionState, Decision]] = []

    def reset(self) -> None:
        self.log = []
        self.inner.reset()

    def decide(self, state: DecisionState) -> Decision:
        d = self.inner.decide(state)
        self.log.append((state, d))
        return d

    @property
    def choices(self) -> list[Choice]:
        return [d.choice for _, d in self.log]
