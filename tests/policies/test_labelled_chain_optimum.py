"""`launcher.simulation.labelled_chain_optimum`: the online optimum over a chain of labelled capacity
states, checked against the two-state solver it generalises."""

from __future__ import annotations

import numpy as np
import pytest

from launcher.policies.base import Choice
from launcher.policies.chain_dp import drain, solve_chain
from launcher.simulation.labelled_chain_optimum import LabelledChain, LabelledChainOptimum

G, OD, SP = 0.1, 3.06, 0.9731


def solved(step: np.ndarray, up: list[bool], W: int, O: int, D: int) -> LabelledChainOptimum:
    return LabelledChainOptimum(LabelledChain(step, np.array(up)), work_hours=W * G, deadline_hours=D * G,
                                overhead_hours=O * G, gap_hours=G, on_demand_price=OD, spot_price=SP)  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_labelled_states_decide_as_the_two_state_solver(seed):
    """With states (down, up) and a per-tick chain, every decision at every tick, progress and held
    cluster is `chain_dp`'s, and so is the expected cost from the start."""
    rng = np.random.default_rng(seed)
    W, O, D = 30, 3, 55
    up_stays, down_stays = rng.uniform(0.5, 0.99, D), rng.uniform(0.5, 0.99, D)
    chain = drain(solve_chain(up_stays, down_stays, W, O, OD * G, SP * G, values=True))
    step = np.stack([[[d, 1 - d], [1 - u, u]] for u, d in zip(up_stays, down_stays)])
    lab = solved(step, [False, True], W, O, D)
    assert (lab.W, lab.O, lab.D) == (W, O, D)
    for up in (False, True):
        held = [(Choice.NONE, 0)] + [(Choice.ON_DEMAND, k) for k in range(O + 1)]
        held += [(Choice.SPOT, k) for k in range(O + 1)] if up else []
        for t in range(D):
            for p in range(W):
                for h, k in held:
                    assert lab.choose(t, p, h, k, int(up)) is chain.choose(t, p, h, k, up), (t, p, h, k, up)
        assert lab.expected_cost(int(up)) == pytest.approx(chain.value(0, 0, Choice.NONE, 0, up), rel=1e-6)


def test_a_state_that_says_more_than_up_or_down_is_used():
    """Two up states that look alike to a two-state chain: one lasts (a spot start pays), one ends
    within a tick (a start only pays its overhead). The optimum starts spot in the first only."""
    W, O, D = 20, 2, 60
    # states: 0 down, 1 up and lasting, 2 up and about to end; down comes back as either
    step = np.array([[[0.5, 0.25, 0.25], [0.01, 0.99, 0.0], [0.99, 0.0, 0.01]]] * D)
    lab = solved(step, [False, True, True], W, O, D)
    assert lab.choose(0, 0, Choice.NONE, 0, 1) is Choice.SPOT
    assert lab.choose(0, 0, Choice.NONE, 0, 2) is not Choice.SPOT
    assert lab.expected_cost(1) < lab.expected_cost(2)


def test_bad_chains_are_refused():
    with pytest.raises(ValueError, match="probability distribution"):
        LabelledChain(np.full((5, 2, 2), 0.4), np.array([False, True]))
    with pytest.raises(ValueError, match=r"\(ticks, C, C\)"):
        LabelledChain(np.full((5, 2, 2), 0.5), np.array([False, True, True]))
    with pytest.raises(ValueError, match="needs 55 steps"):
        solved(np.full((10, 2, 2), 0.5), [False, True], 30, 3, 55)
    with pytest.raises(ValueError, match="cannot finish"):
        solved(np.full((10, 2, 2), 0.5), [False, True], 9, 3, 10)


def test_a_state_reader_that_disagrees_with_the_run_stops_the_policy():
    """The yardstick reads the law's state off the trace; a reader out of step with what the run sees
    (capacity down, the law's state up) is a bug in the bench, stopped with the tick it happened at."""
    from launcher.simulation.engine import SimCase, simulate
    from launcher.simulation.labelled_chain_optimum import LabelledChainOptimumPolicy
    from launcher.simulation.traces import Trace

    step = np.array([[[0.9, 0.1], [0.1, 0.9]]] * 40)
    c = SimCase((Trace("down", 360.0, (False,) * 40),), 0, 1.0, 2.0, 0.1, OD, SP)
    table = LabelledChainOptimum(LabelledChain(step, np.array([False, True])), work_hours=1.0, deadline_hours=2.0,
                                 overhead_hours=0.1, gap_hours=0.1, on_demand_price=OD, spot_price=SP)  # fmt: skip
    with pytest.raises(ValueError, match="tick 0: the law's state 1 says capacity is up"):
        simulate(LabelledChainOptimumPolicy(table, lambda t: 1), c)
    assert simulate(LabelledChainOptimumPolicy(table, lambda t: 0), c).met_deadline
