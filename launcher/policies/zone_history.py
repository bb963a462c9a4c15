"""What was seen of a zone's spot capacity before a run, as evidence the spell estimators add to
their priors (`SpellTracker.seed`, `ZoneModel.seed`): time up and the up spells the cloud ended,
time down and the outages seen to end. The controller reads it from other runs in the ledger
(`launcher.controller.placement_history`); the simulator from the trace's ticks before the job
starts (`SimCase.history_ticks`). Capped at a few spells' worth on each side, since capacity
changes and a run's own spells must soon outweigh what came before it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SEED_SPELLS = 5


@dataclass(frozen=True)
class ZoneHistory:
    up_hours: float  # time seen on (or held on) the zone's spot capacity
    preemptions: int  # up spells seen to end (the cloud took the capacity back)
    down_hours: float = 0.0  # time the zone was seen without spot capacity
    recoveries: int = 0  # outages seen to end (capacity back)

    def __post_init__(self) -> None:
        if not all(math.isfinite(x) and x >= 0 for x in (self.up_hours, self.preemptions, self.down_hours, self.recoveries)):
            raise ValueError("zone history hours and spells must be finite and >= 0")

    def capped(self, max_spells: int = MAX_SEED_SPELLS, max_hours: float | None = None) -> ZoneHistory:
        """At most `max_spells` ended spells a side, keeping each side's mean spell; at most
        `max_hours` hours a side."""

        def side(hours: float, ended: int) -> tuple[float, int]:
            if ended > max_spells:
                hours, ended = hours * max_spells / ended, max_spells
            return (hours if max_hours is None else min(hours, max_hours)), ended

        up, pre = side(self.up_hours, self.preemptions)
        down, rec = side(self.down_hours, self.recoveries)
        return ZoneHistory(up, pre, down, rec)


def history_of_ticks(available: Sequence[bool], gap_hours: float) -> ZoneHistory:
    """Evidence in a run of capacity ticks `gap_hours` apart, watched throughout: each tick's
    time on its side, each change a spell ended (the last spell is still running: no end)."""
    up_ticks = sum(1 for a in available if a)
    pre = sum(1 for a, b in zip(available, available[1:]) if a and not b)
    rec = sum(1 for a, b in zip(available, available[1:]) if b and not a)
    return ZoneHistory(up_ticks * gap_hours, pre, (len(available) - up_ticks) * gap_hours, rec)
