"""Replay a placement policy on the capacity a run has observed: what it would have paid so far.

The policy being run sees every zone's capacity at every decision, so it can run any other policy on
the same history under the simulator's rules (`launcher.simulation.engine`): a spot cluster is
preempted when its zone's capacity is gone at a decision; every start pays the restart overhead
(billed, no progress); the cluster chosen at one decision is held, billed and productive until the
next. Fed at every simulator tick it reproduces the simulator's bill for that policy exactly.
"""

from __future__ import annotations

from dataclasses import replace

from launcher.policies.base import Choice, DecisionState, PlacementPolicy
from launcher.policies.deadline_aware import prices


class ShadowRun:
    __slots__ = ("policy", "held", "zone", "owed", "done", "cost", "preemptions", "_t", "_price")

    def __init__(self, policy: PlacementPolicy) -> None:
        self.policy = policy
        self.reset()

    def reset(self) -> None:
        self.policy.reset()
        self.held, self.zone, self.owed = Choice.NONE, 0, 0.0
        self.done = self.cost = 0.0
        self.preemptions = 0
        self._t: float | None = None
        self._price = 0.0

    def observe(self, state: DecisionState) -> None:
        """Advance to `state`'s time on its capacity, then let the policy decide for its own state."""
        t = state.elapsed_hours
        if self._t is not None and t <= self._t:
            return  # asked again at the same instant: the shadow already decided for it
        if self._t is not None and self.held is not Choice.NONE:
            dt = t - self._t
            self.cost += self._price * dt
            paid = min(self.owed, dt)
            self.owed -= paid
            self.done = min(state.work_total_hours, self.done + dt - paid)
        self._t = t
        avail = state.spot_available
        if self.held is Choice.SPOT and not (self.zone < len(avail) and avail[self.zone]):
            self.held, self.owed = Choice.NONE, 0.0
            self.preemptions += 1
        if self.done >= state.work_total_hours - 1e-9:
            self.held = Choice.NONE
            return
        own = replace(state, work_done_hours=self.done, current=self.held, current_zone=self.zone,
                      preemptions=self.preemptions, overhead_remaining_hours=self.owed)  # fmt: skip
        d = self.policy.decide(own)
        if d.choice is Choice.NONE:
            self.held, self.owed = Choice.NONE, 0.0
            return
        zone = d.zone if d.choice is Choice.SPOT else self.zone
        if d.choice is not self.held or (d.choice is Choice.SPOT and zone != self.zone):
            self.held, self.zone, self.owed = d.choice, zone, state.restart_overhead_hours
        od, sp = prices(state)
        self._price = sp if d.choice is Choice.SPOT else od
