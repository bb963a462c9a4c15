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


class DeadlineAwarePolicy(PlacementPolicy):
    name = "deadline-aware"

    def __init__(
        self,
        reserve_overheads: float = 4.0,
        reserve_work_fraction: float = 0.1,
        poll_hours: float = DEFAULT_POLL_HOURS,
    ) -> None:
        if reserve_overheads < 0 or reserve_work_fraction < 0 or poll_hours <= 0:
            raise ValueError("reserve_overheads and reserve_work_fraction must be >= 0, poll_hours > 0")
        self.reserve_overheads = reserve_overheads
        self.reserve_work_fraction = reserve_work_fraction
        self.poll_hours = poll_hours

    def reserve(self, b: Budget) -> float:
        """Slack to keep for hops back to spot once on on-demand (policy units)."""
        return max(2 * b.overhead, self.reserve_overheads * b.overhead + self.reserve_work_fraction * b.remaining)

    def _spot_zone(self, state: DecisionState) -> int | None:
        """Where to start spot now, or None. Single zone: the current zone if it has capacity."""
        return state.current_zone if state.spot_available[state.current_zone] else None

    def _observe(self, state: DecisionState) -> None:
        """Per-run bookkeeping before each decision (none for one zone)."""

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
        if target is not None:
            return enforce(state, Decision(Choice.SPOT, target, "spot available"), b)
        if state.current is Choice.ON_DEMAND:
            return enforce(state, Decision(Choice.ON_DEMAND, z, "no spot: keep on-demand"), b)
        if b.slack - b.step >= self.reserve(b):
            return enforce(state, Decision(Choice.NONE, z, "slack above reserve: wait for spot"), b)
        return enforce(state, Decision(Choice.ON_DEMAND, z, "slack at reserve: on-demand"), b)


class MultiZonePolicy(DeadlineAwarePolicy):
    name = "multi-zone"
    multi_zone = True

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self._up_since: dict[int, float] = {}

    def reset(self) -> None:
        self._up_since = {}

    def _observe(self, state: DecisionState) -> None:
        now = state.elapsed_hours
        for zi, up in enumerate(state.spot_available):
            if up:
                self._up_since.setdefault(zi, now)
            else:
                self._up_since.pop(zi, None)

    def _spot_zone(self, state: DecisionState) -> int | None:
        if not self._up_since:
            return None
        if state.current is Choice.SPOT and state.current_zone in self._up_since:
            return state.current_zone
        # Longest-running capacity first; ties to the lower zone index (the caller's ranking).
        return min(self._up_since, key=lambda zi: (self._up_since[zi], zi))
