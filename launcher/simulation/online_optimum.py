"""The best any online policy can do when spot capacity is a Markov chain with *known* per-tick
transition probabilities: exact dynamic programming under the simulator's rules.

`omniscient_cost` knows the whole trace, so its cost is out of reach of every real policy: the gap
between a policy and it mixes what the policy gets wrong with what no policy could know. This module
measures the second part. For capacity drawn tick by tick from a two-state chain (up stays up with
probability `p_up_stays`, down stays down with `p_down_stays`), it solves the Bayes-optimal policy:
the one that minimises the expected cost to finish, sees only the past (like every policy here), and
never misses the deadline. No policy that learns the chain from the run can beat it on that chain in
expectation, so `cost(policy) / omniscient` on such traces is bounded below by the ratio it reaches.

State at the decision of tick t (after a preemption has been applied, as in `engine.simulate`):
progress p, the cluster held (none, on-demand, spot), its restart overhead ticks still owed k, and
capacity up or down now. Actions and billing are the simulator's: a start owes O ticks (billed, no
progress), a spot cluster dies at the first tick without capacity, progress counts whole ticks, the
run ends at W ticks of progress; a state from which on-demand can no longer finish by the deadline has
infinite cost, so the optimum never risks a miss.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.policies.chain_dp import drain, solve_chain
from launcher.simulation.engine import SimCase, deadline_ticks, overhead_ticks, work_ticks
from launcher.simulation.traces import Trace



@dataclass(frozen=True)
class MarkovSpells:
    """A two-state chain per tick; mean spells in ticks are 1 / (1 - p_stays)."""

    p_up_stays: float
    p_down_stays: float

    @classmethod
    def from_mean_hours(cls, up_hours: float, down_hours: float, gap_hours: float) -> MarkovSpells:
        if min(up_hours, down_hours, gap_hours) <= 0:
            raise ValueError("mean spells and the tick must be > 0")
        return cls(math.exp(-gap_hours / up_hours), math.exp(-gap_hours / down_hours))

    @property
    def up_share(self) -> float:
        a, b = 1.0 - self.p_up_stays, 1.0 - self.p_down_stays
        return b / (a + b)

    def draw(self, n: int, gap_seconds: float, seed: int, name: str = "markov") -> Trace:
        """`n` ticks, the first drawn from the stationary share."""
        rng = random.Random(seed)
        up = rng.random() < self.up_share
        out = []
        for _ in range(n):
            out.append(up)
            up = (rng.random() < self.p_up_stays) if up else (rng.random() >= self.p_down_stays)
        return Trace(f"{name}-{seed}", gap_seconds, tuple(out))


class OnlineOptimum:
    """The optimal online policy's table for one job shape on one chain: a `MarkovSpells`, or per-tick
    arrays (`p_up_stays`, `p_down_stays`), index t the step from the decision of tick t to tick t + 1,
    at least as long as the ticks to the deadline (a chain whose rates change with time).

    `action[t, s, p]` (int8; 0 wait, 1 on-demand, 2 spot) for progress p = 0..W-1 and the decision
    states s: none with capacity down / up, on-demand with k owed (down / up), spot with k owed (up).
    `expected_cost(up)` is the expected cost (USD) from the first tick."""

    def __init__(self, chain: MarkovSpells | tuple[np.ndarray, np.ndarray], *, work_hours: float,
                 deadline_hours: float, overhead_hours: float, gap_hours: float, on_demand_price: float,
                 spot_price: float) -> None:  # fmt: skip
        W = work_ticks(work_hours, gap_hours)
        D = deadline_ticks(deadline_hours, gap_hours)
        O = overhead_ticks(overhead_hours, gap_hours)
        if W == 0 or W + O > D:
            raise ValueError("the job cannot finish by the deadline even on on-demand")
        if isinstance(chain, MarkovSpells):
            up, down = np.full(D, chain.p_up_stays), np.full(D, chain.p_down_stays)
        else:
            up, down = (np.asarray(a, dtype=float)[:D] for a in chain)
            if len(up) < D or len(down) < D:
                raise ValueError(f"a per-tick chain needs {D} steps, one per tick to the deadline")
        solver = solve_chain(up, down, W, O, on_demand_price * gap_hours, spot_price * gap_hours)
        tab = drain(solver)
        self.g, self.W, self.D, self.O, self.chain = gap_hours, W, D, O, chain
        self.action, self._states, self.v0 = tab.action, tab, tab.v0

    def expected_cost(self, up_at_start: bool) -> float:
        """Expected cost (USD) from the first tick, capacity up or down then."""
        return float(self.v0[self._states.none[int(up_at_start)], 0])

    def choose(self, t: int, p: int, held: Choice, owed: int, up: bool) -> Choice:
        return self._states.choose(t, p, held, owed, up)


class OnlineOptimumPolicy(PlacementPolicy):
    """Acts by an `OnlineOptimum` table: the optimal online policy for a chain it is told (the
    benchmark's yardstick, not a policy for real runs: real runs do not know their chain)."""

    name = "online-optimum"

    def __init__(self, table: OnlineOptimum) -> None:
        self.table = table

    def decide(self, state: DecisionState) -> Decision:
        g = self.table.g
        t = round(state.elapsed_hours / g)
        p = round(state.work_done_hours / g)
        owed = round(state.overhead_remaining_hours / g)
        up = state.spot_available[0]
        c = self.table.choose(t, p, state.current, owed, up)
        return Decision(c, 0, "optimal online policy for the known chain")


def table_for(case: SimCase, chain: MarkovSpells | tuple[np.ndarray, np.ndarray]) -> OnlineOptimum:
    return OnlineOptimum(chain, work_hours=case.work_hours, deadline_hours=case.deadline_hours,
                         overhead_hours=case.overhead_hours, gap_hours=case.gap_hours,
                         on_demand_price=case.on_demand_price, spot_price=case.spot_price)  # fmt: skip
