"""Our deadline-aware placement policies: `deadline-aware` (one zone) and `multi-zone`.

Slack (time to the deadline minus work left) is the budget every choice spends: an idle step costs
one step of it, every cluster start costs one restart overhead `O`, productive time costs none.
Greedy spends all of it idle early and then sits on on-demand to the end, unable to take spot that
comes back (taking it needs 2 O of slack). Uniform Progress keeps a reserve proportional to the time
left, which buys on-demand early even when spot would have come.

`deadline-aware` keeps a *reserve* of slack for hops back to spot once it is on on-demand:

- on a live spot cluster: stay (exploitation);
- spot available, idle: take it; on on-demand: leave for it when the zone's spells (learnt from the
  run, `spells.SpellTracker`) outlast `O (1 + 2 od / (od - sp))`, what a hop loses (an overhead on
  spot, one more back to on-demand after the preemption); the safety net refuses once slack < 2 O;
  where the cloud cannot report capacity and the zone is only due a look, also when one draw of its
  mean up spell from the estimate's posterior would pay for the move (`explore`: the spot cluster is
  launched before on-demand stops, so a look refused costs nothing);
- no spot, idle: wait while slack after this step stays >= reserve; otherwise on-demand;
- no spot, on on-demand: stay on on-demand (leaving it to wait only burns a restart later).

The reserve is `k O` plus a hop (2 O) for every outage expected in the work left (`work_left /
(u + d)`, u and d the zone's mean spells up and down), but only when hops pay and pay better than
waiting, per hour of slack: a hop spends 2 O and saves `u (od - sp) - 2 O od`, a wait through an
outage spends `d + O` and saves `(u - O) od - u sp`. Otherwise (capacity flapping, or outages
shorter than a restart) it keeps the safety net's 2 O and waits like greedy, plus one hop (4 O)
once an outage has outlasted the spells seen by far (`insure_after_overheads`), so that capacity
returning for good after a long outage is not missed. Every decision goes through
`safety.enforce`, so it never misses a deadline that on-demand from the start would meet.
`multi-zone` (`launcher.policies.multi_zone`) is the same rule, moving between zones only where a
move pays.
"""

from __future__ import annotations

import random

from launcher.policies.availability_model import checked_gap_spells
from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy, seen_capacity
from launcher.policies.last_seen import LastSeen, chain_p_up
from launcher.policies.safety import DEFAULT_POLL_HOURS, Budget, budget, enforce, holding_spot
from launcher.policies.spells import KnownSpells, SpellTracker
from launcher.policies.zone_history import ZoneHistory


EXPLORE_SEED = 0  # the draws of `explore`: one generator per run, the same in the simulator and the controller


def prices(state: DecisionState) -> tuple[float, float]:
    """(on-demand, spot) prices per hour; without them, spot at 30% of on-demand."""
    od, sp = state.on_demand_price_usd_per_hour, state.spot_price_usd_per_hour
    if od is None or sp is None or od <= sp:
        return 1.0, 0.3
    return od, sp


class DeadlineAwarePolicy(PlacementPolicy):
    name = "deadline-aware"

    def __init__(
        self,
        reserve_overheads: float = 4.0,
        reserve_work_fraction: float = 0.1,
        poll_hours: float = DEFAULT_POLL_HOURS,
        prior_up_hours: float = 1.0,
        prior_down_hours: float = 2.0,
        prior_weight: float = 0.5,
        hop_margin: float = 1.0,
        compare_wait: bool = True,
        wait_bias: float = 1.0,
        reserve_by_outages: bool = True,
        insure_after_overheads: float = 6.0,
        known_spells_hours: tuple[tuple[float, float], ...] | None = None,
        gap_spells: float | None = 3.0,
        explore: bool = True,
    ) -> None:
        """Defaults chosen on the tuning set only (bench/bench_policies.py). `prior_*`: the spells
        assumed before any is seen, worth `prior_weight` spells; `hop_margin`: the spell a hop asks
        for, in units of its break-even; `compare_wait`/`wait_bias`: keep slack for hops only when
        they beat waiting per hour of slack (by this factor); `reserve_by_outages`: size the
        reserve by the outages expected (else `reserve_work_fraction` of the work left);
        `known_spells_hours`: per zone (mean up, mean down) to use instead of estimates (the
        benchmark's known-spells measurement, `spells.KnownSpells`); `gap_spells`:
        a time between two observations of a zone longer than this many of its mean spells in the
        earlier state is not counted as that state (`spells.SpellTracker`, the rule `markov-dp`'s
        model follows; only a run without a capacity signal leaves such gaps; None: always counted);
        `explore`: on on-demand, where the zone is shown available but not seen and its spells
        seen are too short for a move, try spot when one draw of its mean up spell from the
        estimate's posterior would pay for the move (Thompson sampling, as `markov-dp` does: the
        spot cluster is launched before on-demand stops, so a refusal costs nothing, and a short
        estimate made from a few spells is tested as often as they leave room for long ones)."""
        if reserve_overheads < 0 or reserve_work_fraction < 0 or poll_hours <= 0:
            raise ValueError("reserve_overheads and reserve_work_fraction must be >= 0, poll_hours > 0")
        if prior_up_hours <= 0 or prior_down_hours <= 0 or prior_weight <= 0:
            raise ValueError("prior_up_hours, prior_down_hours and prior_weight must be > 0")
        self.reserve_overheads = reserve_overheads
        self.reserve_work_fraction = reserve_work_fraction
        self.poll_hours = poll_hours
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self.prior_weight = prior_weight
        if hop_margin <= 0:
            raise ValueError("hop_margin must be > 0")
        self.hop_margin = hop_margin
        self.compare_wait = compare_wait
        self.wait_bias = wait_bias
        self.reserve_by_outages = reserve_by_outages
        self.insure_after_overheads = insure_after_overheads
        self.known_spells_hours = known_spells_hours
        self.gap_spells = checked_gap_spells(gap_spells)
        if not isinstance(explore, bool):  # "no" or "0" from a command line must not mean on
            raise ValueError("explore must be True or False")
        self.explore = explore
        self.reset()

    def _tracker(self) -> SpellTracker:
        if self.known_spells_hours is not None:
            return KnownSpells(self.known_spells_hours, self.prior_up_hours, self.prior_down_hours, self.prior_weight,
                               self.gap_spells)  # fmt: skip
        return SpellTracker(self.prior_up_hours, self.prior_down_hours, self.prior_weight, self.gap_spells)

    def reset(self) -> None:
        self.spells = self._tracker()
        self.last_seen = LastSeen()
        self._draws = random.Random(EXPLORE_SEED)

    def seed_history(self, zone: int, history: ZoneHistory) -> None:
        self.spells.seed(zone, history)

    @staticmethod
    def hop_spell_hours(state: DecisionState) -> float:
        """Shortest expected spot spell for which leaving on-demand pays: the hop loses one overhead
        of progress on spot and one more on the way back to on-demand after the preemption, both
        made up at the on-demand price, against (od - spot) saved per productive spot hour."""
        o = state.restart_overhead_hours
        od, sp = state.on_demand_price_usd_per_hour, state.spot_price_usd_per_hour
        if od is None or sp is None or od <= sp:
            return 4.0 * o
        return o * (1.0 + 2.0 * od / (od - sp))

    def reserve(self, b: Budget, state: DecisionState) -> float:
        """Slack to keep for hops back to spot once on on-demand (policy units). When the spells
        seen are too short for a hop to pay, no hop will be made: keep only the safety net's 2 O."""
        if not self._hops_pay(state):
            z = state.current_zone
            if self.insure_after_overheads and not state.spot_available[z] and (
                self.spells.age(z) >= self.insure_after_overheads * state.restart_overhead_hours
            ):
                # An outage far longer than the spells seen: they may not be the regime; keep
                # one hop back to spot so that capacity coming back for long is not missed.
                return 4 * b.overhead
            return 2 * b.overhead
        if self.reserve_by_outages:
            left_h = max(0.0, state.work_total_hours - state.work_done_hours)
            outages = self._outages(state, left_h)
            return max(2 * b.overhead, self.reserve_overheads * b.overhead + 2 * b.overhead * outages)
        return max(2 * b.overhead, self.reserve_overheads * b.overhead + self.reserve_work_fraction * b.remaining)

    def reserve_text(self, state: DecisionState) -> str:
        """What the reserve was sized on, for a decision's reason: the zone's spells as estimated, and
        what they made of the reserve (the branches of `reserve`)."""
        z = state.current_zone
        u, d = self.spells.mean_up(z), self.spells.mean_down(z)
        est = f"zone {z} spells ~{u:.2f} h up, ~{d:.2f} h down"
        if not self._hops_pay(state):
            need = self.hop_need_hours(state)
            why = f"up too short for a hop back to spot (>= {need:.2f} h)" if u < need else "waiting beats hops"
            age = self.spells.age(z)
            if self.insure_after_overheads and not state.spot_available[z] and (
                age >= self.insure_after_overheads * state.restart_overhead_hours
            ):
                return f"{est}: {why}, but this outage ({age:.2f} h) is far past them: one hop kept"
            return f"{est}: {why}, the safety net only"
        left_h = max(0.0, state.work_total_hours - state.work_done_hours)
        if self.reserve_by_outages:
            return (f"{est}: {self.reserve_overheads:g} restarts + a hop per outage expected in the {left_h:.1f} h "
                    "of work left")  # fmt: skip
        return f"{est}: {self.reserve_overheads:g} restarts + {self.reserve_work_fraction:.0%} of the work left"

    def slack_reason(self, b: Budget, state: DecisionState, reserve: float, wait: bool) -> str:
        """An idle decision's reason: the slack a wait would leave and the reserve, in hours, and the
        estimate the reserve was sized on."""
        h = state.gap_hours if state.gap_hours > 0 else 1.0  # policy units (ticks or hours) to hours
        after_h, reserve_h = (b.slack - b.step) * h, reserve * h
        sized = self.reserve_text(state)
        if wait:
            return (f"slack above reserve ({after_h:.2f} h after this step >= {reserve_h:.2f} h): wait for spot; "
                    f"the reserve: {sized}")  # fmt: skip
        return (f"slack at reserve ({after_h:.2f} h after this step < {reserve_h:.2f} h): on-demand; "
                f"the reserve: {sized}")  # fmt: skip

    def _outages(self, state: DecisionState, left_h: float) -> float:
        """Outages expected in `left_h` hours of work: one per up and down spell of this zone."""
        z = state.current_zone
        return left_h / (self.spells.mean_up(z) + self.spells.mean_down(z))

    def hop_need_hours(self, state: DecisionState) -> float:
        """Expected spell this policy asks for before leaving on-demand: the break-even with a margin
        (spells are random; a hop into a short one loses more than a long one gains)."""
        return self.hop_margin * self.hop_spell_hours(state)

    def _hops_pay(self, state: DecisionState) -> bool:
        """Is slack better kept for hops back to spot (on on-demand when capacity returns) than
        spent waiting idle for it? Per hour of slack: a hop spends 2 O (the spot start and the way
        back) and saves u (od - sp) - 2 O od; a wait through an outage spends d + O and saves
        (u - O) od - u sp (spot progress instead of on-demand). u, d: the zone's mean spells."""
        return self._zone_hops_pay(state, state.current_zone)

    def _zone_hops_pay(self, state: DecisionState, z: int) -> bool:
        u, d = self.spells.mean_up(z), self.spells.mean_down(z)
        if u < self.hop_need_hours(state):
            return False
        if not self.compare_wait:
            return True
        o = state.restart_overhead_hours
        od, sp = prices(state)
        hop = (u * (od - sp) - 2 * o * od) / (2 * o) if o > 0 else float("inf")
        wait = ((u - o) * od - u * sp) / (d + o)
        return hop > self.wait_bias * wait

    def _spot_zone(self, state: DecisionState) -> int | None:
        """Where to start spot now, or None. Single zone: the current zone if it has capacity."""
        return state.current_zone if state.spot_available[state.current_zone] else None

    def _observe(self, state: DecisionState) -> None:
        """Per-run bookkeeping before each decision: the spells seen so far."""
        seen = seen_capacity(state)
        self.spells.observe(state.elapsed_hours, seen)
        for z, up in enumerate(seen):
            self.last_seen.observe(z, state.elapsed_hours, up)

    def p_up(self, z: int, now_hours: float) -> float:
        """Chance that zone z has capacity now, for a two-state chain of its mean spells, from what
        was last seen of it (never seen: its share of time up)."""
        u, d = self.spells.mean_up(z), self.spells.mean_down(z)
        seen = self.last_seen.get(z)
        if seen is None:
            return u / (u + d)
        return chain_p_up(1.0 if seen[1] else 0.0, 1.0 / u, 1.0 / d, now_hours - seen[0])

    def _unseen_text(self, state: DecisionState, target: int) -> str:
        """From on-demand, into a zone shown available but not seen (a probe on a cloud that cannot
        report capacity): what the reason says of it. The try goes ahead where spells pay, as with
        the zone seen up: the spot cluster is launched before on-demand stops, so a refusal costs
        nothing (make-before-break, in the controller and the simulator)."""
        seen = state.spot_observed
        if seen is None or seen[target]:
            return ""
        since = self.last_seen.since_text(target, state.elapsed_hours)
        return f"capacity not seen ({since}): up with probability {self.p_up(target, state.elapsed_hours):.2f}"

    def decide(self, state: DecisionState) -> Decision:
        z = state.current_zone
        self._observe(state)
        if state.deadline_hours is None:  # no deadline: spot whenever there is some, else wait
            target = self._spot_zone(state)
            return Decision(Choice.SPOT, target, "spot, no deadline") if target is not None else Decision(
                Choice.NONE, z, "wait for spot, no deadline"
            )
        b = budget(state, self.poll_hours)
        if b.remaining <= 0:
            return Decision(Choice.NONE, z, "done")
        if holding_spot(state):
            return Decision(Choice.SPOT, z, "exploit the live spot cluster")
        target = self._spot_zone(state)
        if target is not None and state.current is Choice.ON_DEMAND:
            need = self.hop_need_hours(state)
            spell = self.spells.mean_up(target)
            if spell >= need:
                seen = self._unseen_text(state, target)
                why = f"spot back (spells ~{spell:.2f} h >= {need:.2f} h to pay for the move): leave on-demand"
                return enforce(state, Decision(Choice.SPOT, target, f"{seen}; try spot: {why}" if seen else why), b)
            seen = self._unseen_text(state, target)
            drawn = self.spells.drawn_mean_up(target, self._draws) if seen and self.explore else 0.0
            if drawn >= need:
                why = (f"spells ~{spell:.2f} h < {need:.2f} h, but a draw of them from the posterior, {drawn:.2f} h, "
                       f"pays for the move")  # fmt: skip
                return enforce(state, Decision(Choice.SPOT, target, f"{seen}; try spot: {why}"), b)
            why = f"spot back but spells ~{spell:.2f} h < {need:.2f} h: a move would not pay, keep on-demand"
            return enforce(state, Decision(Choice.ON_DEMAND, z, why), b)
        if target is not None:
            return enforce(state, Decision(Choice.SPOT, target, "spot available"), b)
        if state.current is Choice.ON_DEMAND:
            return enforce(state, Decision(Choice.ON_DEMAND, z, "no spot: keep on-demand"), b)
        reserve = self.reserve(b, state)
        if b.slack - b.step >= reserve:
            return enforce(state, Decision(Choice.NONE, z, self.slack_reason(b, state, reserve, True)), b)
        return enforce(state, Decision(Choice.ON_DEMAND, z, self.slack_reason(b, state, reserve, False)), b)
