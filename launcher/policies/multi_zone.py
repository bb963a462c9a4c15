"""`multi-zone`: deadline-aware placement over several zones (the plan's spot offers, in rank order).

It is `deadline-aware` in the zone it is in, and looks at the other zones only where a move can
pay for itself:

- on a live spot cluster: stay (a move costs a restart and gains nothing while this one runs);
- on on-demand: leave for the zone with capacity whose spells have been longest, when they are long
  enough to repay the hop (the same rule as `deadline-aware` in its own zone);
- the reserve: as `deadline-aware`'s, but counting the larger of this zone's outages and those of
  "some zone has capacity" (`_outages`);
- idle, its zone without capacity: wait as `deadline-aware` would while the slack is above the
  reserve; move instead when the idle time expected waiting for this zone would use up the
  slack above the reserve, with a margin (see `_binding`), or
  when `deadline-aware` would go on-demand, or when this zone's spells are too short to repay a
  start, to the zone with the longest spells if they repay one. So where zones fail together there is nowhere to move to, and where capacity is
  plentiful the wait is free: it stays, and costs what `deadline-aware` costs;
- idle away from the home zone (zone 0, the plan's first) while it has capacity: start there when its
  spells are no shorter than this zone's (`_home`). A start is due either way, and being where
  `deadline-aware` would be keeps the bill close to its: moves made on early, prior-driven estimates
  are undone once the home zone has capacity again, instead of tying the job to a zone whose spells
  may turn out shorter.
"""

from __future__ import annotations

from launcher.policies.base import Choice, Decision, DecisionState, any_seen_up, seen_capacity
from launcher.policies.deadline_aware import DeadlineAwarePolicy, prices
from launcher.policies.safety import Budget, budget, enforce
from launcher.policies.spells import SpellTracker


class MultiZonePolicy(DeadlineAwarePolicy):
    name = "multi-zone"
    multi_zone = True

    def __init__(self, *, move_when_binding: bool = True, bind_margin: float = 2.0, start_margin: float = 1.0,
                 prior_up_fraction: float = 0.8, prior_fraction_hours: float = 1.0, reserve_by_any_zone: bool = True,
                 **params) -> None:  # fmt: skip
        """`move_when_binding`: move while idle when waiting for this zone would eat the slack;
        `bind_margin`: the expected idle time waiting for this zone is multiplied by it before it
        is compared with the slack above the reserve (> 1: move before the slack would run out);
        `start_margin`: the expected spell a start in another zone asks for, in units of its
        break-even; `prior_up_fraction`, `prior_fraction_hours`: the share of time up assumed
        before any is seen, and what it is worth; `reserve_by_any_zone`: count the outages the
        reserve is kept for also as spells of "some zone has capacity" (see `_outages`)."""
        super().__init__(**params)
        if bind_margin <= 0 or start_margin <= 0:
            raise ValueError("bind_margin and start_margin must be > 0")
        self.move_when_binding = move_when_binding
        self.bind_margin = bind_margin
        self.start_margin = start_margin
        self.prior_up_fraction = prior_up_fraction
        self.prior_fraction_hours = prior_fraction_hours
        self.reserve_by_any_zone = reserve_by_any_zone
        self.any_zone = SpellTracker(self.prior_up_hours, self.prior_down_hours, self.prior_weight, self.gap_spells)

    def reset(self) -> None:
        super().reset()
        self.any_zone = SpellTracker(self.prior_up_hours, self.prior_down_hours, self.prior_weight, self.gap_spells)

    def _observe(self, state: DecisionState) -> None:
        super()._observe(state)
        self.any_zone.observe(state.elapsed_hours, (any_seen_up(seen_capacity(state)),))

    def _outages(self, state: DecisionState, left_h: float) -> float:
        """Outages the reserve is kept for: this zone's, or as many as the spells of "some zone has
        capacity" make, if more. A zone coming back is a hop off on-demand wherever it is, and when
        zones fail apart they come back more often than one zone does: a reserve sized for one
        zone's outages is spent on the others' and leaves the end of the job on on-demand."""
        own = super()._outages(state, left_h)
        if not self.reserve_by_any_zone:
            return own
        return max(own, left_h / (self.any_zone.mean_up(0) + self.any_zone.mean_down(0)))

    def _hops_pay(self, state: DecisionState) -> bool:
        return any(self._zone_hops_pay(state, z) for z in range(len(state.spot_available)))

    def _best(self, state: DecisionState, exclude: int | None = None) -> int | None:
        """The zone with capacity now whose spells are longest (ties: lower index)."""
        up = [z for z, a in enumerate(state.spot_available) if a and z != exclude]
        return max(up, key=lambda z: (self.spells.mean_up(z), -z)) if up else None

    def _start_need_hours(self, state: DecisionState) -> float:
        """Expected spell for which a spot start (instead of on-demand) pays: it loses O of
        progress at the spot price and, once preempted, one more start: u (od - sp) > O od."""
        o = state.restart_overhead_hours
        od, sp = prices(state)
        return self.start_margin * o * od / (od - sp)

    def _binding(self, state: DecisionState, z: int, b: Budget, reserve: float) -> bool:
        """Would waiting for zone `z` alone run the slack down? Expected time to finish there: the
        work left over the share of time it has capacity, less the start lost in each spell; the
        part of it spent idle is slack spent. Binding when that idle time, times `bind_margin`,
        is more than the slack above the reserve: a move spends one restart of slack and money,
        a wait only slack, so it moves only when waiting would clearly use up what can be spent.
        (In policy units, as the budget: the controller's clock is not exactly on the ticks.)"""
        u = self.spells.mean_up(z)
        o = state.restart_overhead_hours
        if u <= o:
            return True
        f = self.spells.up_fraction(z, self.prior_up_fraction, self.prior_fraction_hours)
        if f <= 0:
            return True
        idle = b.remaining / (f * (1.0 - o / u)) - b.remaining
        return idle * self.bind_margin > b.slack - reserve

    def _home(self, state: DecisionState) -> Decision | None:
        """Idle in another zone while the home zone has capacity and spells no shorter than this
        zone's (and long enough to repay a start): start in the home zone."""
        z = state.current_zone
        if z == 0 or not state.spot_available[0]:
            return None
        home, here = self.spells.mean_up(0), self.spells.mean_up(z)
        if home < here or home < self._start_need_hours(state):
            return None
        why = f"back to the home zone 0: it has capacity and its spells (~{home:.2f} h) are no shorter than zone {z}'s (~{here:.2f} h)"
        return Decision(Choice.SPOT, 0, why)

    def decide(self, state: DecisionState) -> Decision:
        z = state.current_zone
        if state.deadline_hours is None or state.current is not Choice.NONE or (
            state.spot_available[z] and (z == 0 or not state.spot_available[0])
        ):
            return super().decide(state)
        self._observe(state)
        b = budget(state, self.poll_hours)
        if b.remaining <= 0:
            return Decision(Choice.NONE, z, "done")
        home = self._home(state)
        if home is not None:
            return enforce(state, home, b)
        if state.spot_available[z]:
            return super().decide(state)  # observing again at the same instant changes nothing
        best = self._best(state)
        reserve = self.reserve(b, state)
        can_wait = b.slack - b.step >= reserve
        if best is not None:
            spell, need = self.spells.mean_up(best), self._start_need_hours(state)
            if spell >= need:
                if not can_wait:
                    why = f"zone {z} down, slack at reserve: move to zone {best} (spells ~{spell:.2f} h)"
                    return enforce(state, Decision(Choice.SPOT, best, why), b)
                here = self.spells.mean_up(z)
                if here < need:
                    why = f"zone {z} down and its spells (~{here:.2f} h) do not repay a start: move to zone {best} (spells ~{spell:.2f} h)"
                    return enforce(state, Decision(Choice.SPOT, best, why), b)
                if self.move_when_binding and self._binding(state, z, b, reserve):
                    why = f"zone {z} down and waiting for it would use up the slack: move to zone {best} (spells ~{spell:.2f} h)"
                    return enforce(state, Decision(Choice.SPOT, best, why), b)
        return enforce(state, Decision(Choice.NONE if can_wait else Choice.ON_DEMAND, z,
                                       self.slack_reason(b, state, reserve, can_wait)), b)  # fmt: skip

    def _spot_zone(self, state: DecisionState) -> int | None:
        """Where a spot start goes. From on-demand: a hop costs the same wherever it lands and is
        worth more the longer the spell, so to the zone whose spells have been longest (this one on
        a tie). From idle: this zone when it has capacity (moving elsewhere is `decide`'s call)."""
        z = state.current_zone
        best = self._best(state)
        if not state.spot_available[z]:
            return best
        if state.current is Choice.ON_DEMAND and best is not None and (
            self.spells.mean_up(best) > self.spells.mean_up(z)
        ):
            return best
        return z
