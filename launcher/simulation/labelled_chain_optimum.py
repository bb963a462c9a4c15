"""The best online policy when spot capacity is a Markov chain over more states than up and down, all
of them seen by the policy: the exact online optimum for laws where what comes next depends on more
than whether capacity is up now (which regime the running spell was drawn in, whether it began a
tick ago), as long as a policy that knows the law can read that state off the trace it has seen.

`online_optimum` solves the two-state chain; this is the same backward induction under the same
simulator rules (`launcher.simulation.engine`) with the capacity state c in 0..C-1, each state
labelled up or down, and per-tick transition matrices. Told the law and the state it reads, the
policy is the Bayes-optimal one: no policy that sees only the past does better in expectation on
traces drawn from that law. With C = 2 it is `chain_dp.solve_chain`, decision for decision (tested).

Decision state at tick t: progress p, the cluster held (none, on-demand owing k restart ticks, spot
owing k; spot only in an up state) and c. A start owes O ticks (billed, no progress); a spot cluster
dies at the first tick in a down state (the progress of the tick before is kept); the run ends at W
ticks of progress; a state from which the work cannot finish by the deadline costs infinity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.policies.chain_dp import _TIE  # one tie tolerance for both solvers: they decide alike
from launcher.simulation.engine import SimCase, deadline_ticks, overhead_ticks, work_ticks


@dataclass(frozen=True)
class LabelledChain:
    """`step[t, c, c2]`: the chance that capacity in state c at the decision of tick t is in state c2
    at tick t + 1 (rows sum to 1); `up[c]`: is capacity up in state c."""

    step: np.ndarray
    up: np.ndarray

    def __post_init__(self) -> None:
        if self.step.ndim != 3 or self.step.shape[1:] != (len(self.up),) * 2:
            raise ValueError("step must be (ticks, C, C) for C labelled states")
        if not np.allclose(self.step.sum(axis=2), 1.0, atol=1e-9) or (self.step < 0).any():
            raise ValueError("each row of a step must be a probability distribution")


class LabelledChainOptimum:
    """Actions (0 wait, 1 on-demand, 2 spot) per tick, state and progress for one job shape on one
    labelled chain, solved at construction; `expected_cost(c)` from the first tick in state c."""

    def __init__(self, chain: LabelledChain, *, work_hours: float, deadline_hours: float, overhead_hours: float,
                 gap_hours: float, on_demand_price: float, spot_price: float) -> None:  # fmt: skip
        W = work_ticks(work_hours, gap_hours)
        D = deadline_ticks(deadline_hours, gap_hours)
        O = overhead_ticks(overhead_hours, gap_hours)
        if W == 0 or W + O > D:
            raise ValueError("the job cannot finish by the deadline even on on-demand")
        if len(chain.step) < D:
            raise ValueError(f"a labelled chain needs {D} steps, one per tick to the deadline")
        self.g, self.W, self.D, self.O = gap_hours, W, D, O
        self.up = np.asarray(chain.up, dtype=bool)
        C, K = len(self.up), O + 1
        self.act_none = np.zeros((D, C, W), np.int8)
        self.act_od = np.zeros((D, K, C, W), np.int8)
        self.act_sp = np.zeros((D, K, C, W), np.int8)
        od, sp = on_demand_price * gap_hours, spot_price * gap_hours
        up_col = self.up[:, None]
        # Values at the next decision, progress 0..W (column W: done, nothing more to pay).
        n_none = np.full((C, W + 1), np.inf)
        n_od = np.full((K, C, W + 1), np.inf)
        n_sp = np.full((K, C, W + 1), np.inf)
        for a in (n_none, n_od, n_sp):
            a[..., W] = 0.0
        for t in range(D - 1, -1, -1):
            P = chain.step[t]
            e_none = _expect(P, n_none[None])[0]
            e_od = _expect(P, n_od)
            # a spot cluster goes on where capacity stays up, and is lost (none) where it goes down
            e_sp = _expect(P, np.where(self.up[None, :, None], n_sp, n_none[None]))
            run_od, run_sp = _held(e_od, od, W), _held(e_sp, sp, W)  # [k owed this tick, c, p]
            wait = e_none[:, :W]
            od_start, sp_start = run_od[O], np.where(up_col, run_sp[O], np.inf)
            v_none, a_none = _choose(wait, od_start, sp_start, up_col)
            v_od, a_od = _choose(wait[None], run_od, sp_start[None], up_col[None])
            v_sp, a_sp = _choose(wait[None], od_start[None], np.where(up_col[None], run_sp, np.inf), up_col[None])
            self.act_none[t], self.act_od[t], self.act_sp[t] = a_none, a_od, a_sp
            n_none[:, :W], n_od[..., :W], n_sp[..., :W] = v_none, v_od, v_sp
        self._v0 = n_none[:, 0].copy()

    def expected_cost(self, state: int) -> float:
        """Expected cost (USD) from the first tick, idle, capacity in `state`."""
        return float(self._v0[state])

    def choose(self, t: int, p: int, held: Choice, owed: int, state: int) -> Choice:
        if p >= self.W:
            return Choice.NONE
        t, p, k = min(max(t, 0), self.D - 1), max(p, 0), min(max(owed, 0), self.O)
        if held is Choice.SPOT and self.up[state]:
            a = self.act_sp[t, k, state, p]
        elif held is Choice.ON_DEMAND:
            a = self.act_od[t, k, state, p]
        else:
            a = self.act_none[t, state, p]
        return (Choice.NONE, Choice.ON_DEMAND, Choice.SPOT)[int(a)]


def _expect(P: np.ndarray, v: np.ndarray) -> np.ndarray:
    """E[v[k, next state, p] | state now] for each k: infinite where an infinite value has a chance
    (a step of chance 0 to an infinite value adds nothing, where 0 * inf would be nan)."""
    bad = np.isinf(v)
    out = np.einsum("ij,kjw->kiw", P, np.where(bad, 0.0, v))
    out[np.einsum("ij,kjw->kiw", (P > 0).astype(float), bad.astype(float)) > 0] = np.inf
    return out


def _held(e_next: np.ndarray, price_tick: float, W: int) -> np.ndarray:
    """Cost of holding a cluster this tick, owing k = 0..O restart ticks, from the next decision's
    expected values `e_next[k]` (progress 0..W): overhead first (k - 1 owed next), then progress."""
    out = np.empty((e_next.shape[0], e_next.shape[1], W))
    out[1:] = e_next[:-1, :, :W] + price_tick
    out[0] = e_next[0, :, 1:] + price_tick
    return out


def _choose(wait: np.ndarray, od: np.ndarray, spot: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`chain_dp`'s choice: on-demand only if cheaper than waiting beyond a tie; then, capacity up,
    spot if no dearer than the better of those two within a tie (progress now at the same cost)."""
    take_od = od < wait * (1.0 - _TIE) - _TIE
    best = np.where(take_od, od, wait)
    take_sp = up & (spot <= best * (1.0 + _TIE) + _TIE)
    return np.where(take_sp, spot, best), np.where(take_sp, np.int8(2), take_od.astype(np.int8))


class LabelledChainOptimumPolicy(PlacementPolicy):
    """Acts by a `LabelledChainOptimum` table, reading the capacity state at each decision with
    `state_at(tick)` (ticks from the run's start; it must read only the trace up to that tick). A
    benchmark's yardstick, not a policy for real runs: real runs do not know their law."""

    name = "labelled-chain-optimum"

    def __init__(self, table: LabelledChainOptimum, state_at: Callable[[int], int]) -> None:
        self.table, self.state_at = table, state_at

    def decide(self, state: DecisionState) -> Decision:
        g = self.table.g
        t = round(state.elapsed_hours / g)
        c = self.state_at(t)
        if bool(self.table.up[c]) != bool(state.spot_available[0]):
            raise ValueError(f"tick {t}: the law's state {c} says capacity is {'up' if self.table.up[c] else 'down'}, "
                             "the run sees otherwise")  # fmt: skip
        p, owed = round(state.work_done_hours / g), round(state.overhead_remaining_hours / g)
        return Decision(self.table.choose(t, p, state.current, owed, c), 0, "optimal online policy for the known law")


def labelled_table_for(case: SimCase, chain: LabelledChain) -> LabelledChainOptimum:
    return LabelledChainOptimum(chain, work_hours=case.work_hours, deadline_hours=case.deadline_hours,
                                overhead_hours=case.overhead_hours, gap_hours=case.gap_hours,
                                on_demand_price=case.on_demand_price, spot_price=case.spot_price)  # fmt: skip
