"""Interfaces shared by the controller, the simulator and the policies.

A *placement policy* is asked, at every decision point, what to hold next: a spot cluster, an
on-demand cluster, or nothing (wait). The simulator asks once per trace tick; the controller asks
when an attempt starts, after a preemption or node loss, and periodically while waiting.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from enum import Enum

from launcher.policies.zone_history import ZoneHistory
from pricing.models import ScoredOffer


class Choice(str, Enum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"
    NONE = "none"


@dataclass(frozen=True)
class DecisionState:
    """What a policy may look at. Times in hours; `None` deadline = no deadline."""

    elapsed_hours: float
    work_done_hours: float
    work_total_hours: float
    deadline_hours: float | None
    restart_overhead_hours: float
    current: Choice  # what is held right now (NONE after a preemption)
    current_zone: int  # index into spot_available
    spot_available: tuple[bool, ...]  # per zone, right now
    gap_hours: float = 0.0  # decision granularity (simulator tick); 0 = event-driven
    spot_price_usd_per_hour: float | None = None
    on_demand_price_usd_per_hour: float | None = None
    preemptions: int = 0
    # Restart overhead still to pay on the cluster held now (0 when productive or idle).
    overhead_remaining_hours: float = 0.0
    # Per zone, whether `spot_available` was seen (held, refused, preempted) or stands in for what
    # nobody could see (a cloud with no capacity signal: counted available so the policy tries it).
    # None: every zone seen (the simulator). Policies that learn spells learn only from what was seen.
    spot_observed: tuple[bool, ...] | None = None


def seen_capacity(state: DecisionState) -> tuple[bool | None, ...]:
    """`spot_available` with None where the zone's capacity was not seen at this decision."""
    seen = state.spot_observed
    if seen is None:
        return state.spot_available
    return tuple(up if i < len(seen) and seen[i] else None for i, up in enumerate(state.spot_available))


def any_seen_up(capacity: tuple[bool | None, ...]) -> bool | None:
    """Whether some zone has capacity: True if one was seen up, False if all were seen down, else unknown."""
    if any(up is not None and up for up in capacity):
        return True
    return None if any(up is None for up in capacity) else False


@dataclass(frozen=True)
class Decision:
    choice: Choice
    zone: int = 0
    reason: str = ""


class PlacementPolicy(abc.ABC):
    """Decide spot / on-demand / none. Stateless across runs; per-run state lives in `reset`."""

    name: str = "base"
    multi_zone: bool = False

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Called before a new run/case; clear per-run state."""

    def seed_history(self, zone: int, history: ZoneHistory) -> None:  # noqa: B027 - optional hook
        """What was seen of a zone's spot capacity before the run (after `reset`); policies that
        learn spells use it, the others ignore it."""

    @abc.abstractmethod
    def decide(self, state: DecisionState) -> Decision: ...


@dataclass(frozen=True)
class RecoveryContext:
    """What the controller knows when it must place the next attempt."""

    ranked: tuple[ScoredOffer, ...]  # enabled offers, best first
    previous: ScoredOffer | None  # the offer of the attempt that just ended (None at first start)
    preempted_regions: tuple[str, ...] = ()  # regions that preempted us, oldest first
    state: DecisionState | None = None
    attempt: int = 0
    tried: tuple[ScoredOffer, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class RecoveryDecision:
    offer: ScoredOffer | None  # None = wait
    wait_seconds: float = 0.0
    reason: str = ""


class RecoveryPolicy(abc.ABC):
    name: str = "base"

    @abc.abstractmethod
    def choose(self, ctx: RecoveryContext) -> RecoveryDecision: ...
