"""Our deadline-aware placement policies: `deadline-aware` (one zone) and `multi-zone`.

Slack (time to the deadline minus work left) is the budget every choice spends: an idle step costs
one step of it, every cluster start costs one restart overhead `O`, productive time costs none.
Greedy spends all of it idle early and then sits on on-demand to the end, unable to take spot that
comes back (taking it needs 2 O of slack). Uniform Progress keeps a reserve proportional to the time
left, which buys on-demand early even when spot would have come.

`deadline-aware` keeps a *reserve* of slack proportional to the work left, plus a few overheads:

    reserve = max(2 O, k O + gamma * work_left)        (defaults k = 4, gamma = 0.1)

- on a live spot cluster: stay (exploitation);
- spot available: take it, also from on-demand (a hop spends O of slack, and O more if it is
  preempted, which is what the reserve is for); the safety net refuses once slack < 2 O;
- no spot, idle: wait while slack after this step stays >= reserve; otherwise on-demand;
- no spot, on on-demand: stay on on-demand (leaving it to wait only burns a restart later).

So it waits like greedy while slack is plentiful, but arrives at the on-demand phase with slack
left for several hops back to spot. On the benchmark this beats both greedy and Uniform Progress
(see bench/bench_policies.py). Every decision goes through `safety.enforce`, so it never misses a
deadline that on-demand from the start would meet.

`multi-zone` is the same rule over several zones: when its zone's spot capacity is gone (or it is
idle or on on-demand) it starts spot in another zone that has capacity, paying the restart overhead,
preferring the zone whose capacity has been up longest (availability spells are heavy-tailed, so an
old spell is likely to last).
"""

from __future__ import annotations

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.policies.safety import DEFAULT_POLL_HOURS, Budget, budget, enforce, holding_spot


class SpellTracker:
    """Per-zone lengths of the capacity spells seen so far (hours), for judging whether a move pays.

    Availability spells differ by orders of magnitude between regimes (minutes when capacity flaps,
    days when it is plentiful); a hop onto spot pays only when the spell it lands in outlasts the
    restart overheads it costs, so the policy learns the spell lengths of the run it is in. Each
    estimate starts from a prior worth one spell."""

    __slots__ = ("_since", "_state", "_up", "_down", "prior_up_hours", "prior_down_hours")

    def __init__(self, prior_up_hours: float, prior_down_hours: float) -> None:
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self._since: dict[int, float] = {}
        self._state: dict[int, bool] = {}
        self._up: dict[int, list[float]] = {}
        self._down: dict[int, list[float]] = {}

    def observe(self, now_hours: float, available: tuple[bool, ...]) -> None:
        for z, up in enumerate(available):
            prev = self._state.get(z)
            if prev is None:
                self._state[z], self._since[z] = up, now_hours
            elif prev != up:
                (self._up if prev else self._down).setdefault(z, []).append(now_hours - self._since[z])
                self._state[z], self._since[z] = up, now_hours

    def mean_up(self, z: int) -> float:
        seen = self._up.get(z, [])
        return (sum(seen) + self.prior_up_hours) / (len(seen) + 1)

    def mean_down(self, z: int) -> float:
        seen = self._down.get(z, [])
        return (sum(seen) + self.prior_down_hours) / (len(seen) + 1)

    def age(self, z: int, now_hours: float) -> float:
        return now_hours - self._since.get(z, now_hours)


class DeadlineAwarePolicy(PlacementPolicy):
    name = "deadline-aware"

    def __init__(
        self,
        reserve_overheads: float = 4.0,
        reserve_work_fraction: float = 0.1,
        poll_hours: float = DEFAULT_POLL_HOURS,
        prior_up_hours: float = 4.0,
        prior_down_hours: float = 1.0,
    ) -> None:
        if reserve_overheads < 0 or reserve_work_fraction < 0 or poll_hours <= 0:
            raise ValueError("reserve_overheads and reserve_work_fraction must be >= 0, poll_hours > 0")
        if prior_up_hours <= 0 or prior_down_hours <= 0:
            raise ValueError("prior_up_hours and prior_down_hours must be > 0")
        self.reserve_overheads = reserve_overheads
        self.reserve_work_fraction = reserve_work_fraction
        self.poll_hours = poll_hours
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self.spells = SpellTracker(prior_up_hours, prior_down_hours)

    def reset(self) -> None:
        self.spells = SpellTracker(self.prior_up_hours, self.prior_down_hours)

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

    def reserve(self, b: Budget, hops_pay: bool = True) -> float:
        """Slack to keep for hops back to spot once on on-demand (policy units). When the spells
        seen are too short for a hop to pay, no hop will be made: keep only the safety net's 2 O."""
        if not hops_pay:
            return 2 * b.overhead
        return max(2 * b.overhead, self.reserve_overheads * b.overhead + self.reserve_work_fraction * b.remaining)

    def _hops_pay(self, state: DecisionState) -> bool:
        return self.spells.mean_up(state.current_zone) >= self.hop_spell_hours(state)

    def _spot_zone(self, state: DecisionState) -> int | None:
        """Where to start spot now, or None. Single zone: the current zone if it has capacity."""
        return state.current_zone if state.spot_available[state.current_zone] else None

    def _observe(self, state: DecisionState) -> None:
        """Per-run bookkeeping before each decision: the spells seen so far."""
        self.spells.observe(state.elapsed_hours, state.spot_available)

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
            need = self.hop_spell_hours(state)
            spell = self.spells.mean_up(target)
            if spell >= need:
                why = f"spot back (spells ~{spell:.2f} h >= {need:.2f} h to pay for the move): leave on-demand"
                return enforce(state, Decision(Choice.SPOT, target, why), b)
            why = f"spot back but spells ~{spell:.2f} h < {need:.2f} h: a move would not pay, keep on-demand"
            return enforce(state, Decision(Choice.ON_DEMAND, z, why), b)
        if target is not None:
            return enforce(state, Decision(Choice.SPOT, target, "spot available"), b)
        if state.current is Choice.ON_DEMAND:
            return enforce(state, Decision(Choice.ON_DEMAND, z, "no spot: keep on-demand"), b)
        reserve = self.reserve(b, self._hops_pay(state))
        if b.slack - b.step >= reserve:
            why = f"slack above reserve ({b.slack:.4g} > {reserve:.4g}): wait for spot"
            return enforce(state, Decision(Choice.NONE, z, why), b)
        return enforce(state, Decision(Choice.ON_DEMAND, z, f"slack at reserve ({b.slack:.4g} <= {reserve:.4g}): on-demand"), b)


class MultiZonePolicy(DeadlineAwarePolicy):
    name = "multi-zone"
    multi_zone = True

    def __init__(self, *, wait_overheads: float = 2.0, **params) -> None:
        """`wait_overheads`: idle with its zone down and slack to spare, wait while the zone's
        expected remaining outage is at most this many restart overheads (inf: always wait while
        the slack lasts, move only instead of on-demand)."""
        super().__init__(**params)
        if wait_overheads < 0:
            raise ValueError("wait_overheads must be >= 0")
        self.wait_overheads = wait_overheads

    def _spot_zone(self, state: DecisionState) -> int | None:
        z, now = state.current_zone, state.elapsed_hours
        if state.spot_available[z]:
            return z
        others = [zi for zi, up in enumerate(state.spot_available) if up]
        if not others:
            return None
        if state.current is Choice.NONE and state.deadline_hours is not None:
            # Waiting for this zone is free while slack lasts; a move costs an overhead. Stay when
            # its outages are short and the slack covers the wait.
            b = budget(state, self.poll_hours)
            left_down = self.spells.mean_down(z) - self.spells.age(z, now)
            if b.slack - b.step >= self.reserve(b) and (
                left_down <= self.wait_overheads * state.restart_overhead_hours
            ):
                return None
        # Longest-running capacity first (spells are heavy-tailed); ties to the lower zone index.
        best = max(others, key=lambda zi: (self.spells.age(zi, now), -zi))
        if self.spells.mean_up(best) < 2 * state.restart_overhead_hours:
            return None  # spells there are too short to repay the start
        return best
