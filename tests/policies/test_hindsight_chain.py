"""`bench/bench_hindsight_chain.py`: the chains it reads off a trace with hindsight, and the optimum over
a down spell's age that it solves on them."""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

from launcher.simulation.engine import SimCase, deadline_ticks, simulate
from launcher.simulation.labelled_chain_optimum import LabelledChainOptimumPolicy, labelled_table_for
from launcher.simulation.online_optimum import MarkovSpells, OnlineOptimumPolicy, table_for
from launcher.simulation.traces import Trace

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import bench_hindsight_chain as hc  # noqa: E402

OD, SP, GAP_S = 3.06, 0.9731, 240.0
T, F = True, False


def test_the_realized_chain_counts_each_kind_of_step_with_half_a_count_added():
    # up: stays once, ends once; down: stays twice, ends once
    chain = hc.realized_chain((T, T, F, F, F, T))
    assert chain.p_up_stays == pytest.approx(1.5 / 3)
    assert chain.p_down_stays == pytest.approx(2.5 / 4)
    # a trace that never changes is not read as certain to stay
    assert hc.realized_chain((T,) * 10).p_up_stays == pytest.approx(9.5 / 10)


def test_whole_spells_leave_out_the_spells_the_trace_ends_cut():
    trace = (T, T, F, F, F, T, T, F)
    assert hc.whole_spells(trace, False) == [3]
    assert hc.whole_spells(trace, True) == [2]
    assert hc.whole_spells((T, T, T), True) == []


def test_age_stays_are_the_share_of_spells_of_each_age_that_go_on():
    stays = hc.age_stays([1, 2, 2, 4], 3)
    # lasted 1 tick: 4 spells, 3 go on; lasted 2: 3, 1 goes on; 3 or more: one spell 2 ticks past
    # the class's start, a mean stay of 2
    assert stays == pytest.approx([3 / 4, 1 / 3, 1 - 1 / 2])
    assert hc.age_stays([1, 1], 3) == pytest.approx([0.0, 0.0, 0.0])  # no spell reached classes 1, 2


def test_age_states_are_read_off_the_trace():
    assert list(hc.age_states((T, F, F, F, T, F), 2)) == [0, 1, 2, 2, 0, 1]


def _case(available: tuple[bool, ...], work: float = 4.0, deadline: float = 6.0) -> SimCase:
    return SimCase((Trace(name="t", gap_seconds=GAP_S, available=available),), 0, work, deadline, 0.2, OD, SP)


def _age_policy(case: SimCase, up_stays: float, down_stays: np.ndarray) -> LabelledChainOptimumPolicy:
    D = deadline_ticks(case.deadline_hours, case.gap_hours)
    chain = hc.age_chain(up_stays, down_stays, D)
    states = hc.age_states(case.traces[0].available + (False,) * 8, len(down_stays))
    return LabelledChainOptimumPolicy(labelled_table_for(case, chain), lambda t: int(states[t]))


def test_a_down_spell_law_that_does_not_change_with_age_is_the_two_state_chain():
    """Every age class with the same chance to go on: the age optimum decides as the two-state one."""
    rng = random.Random(5)
    for _ in range(4):
        available = tuple(rng.random() < 0.6 for _ in range(120))
        case = _case(available)
        two = simulate(OnlineOptimumPolicy(table_for(case, MarkovSpells(0.8, 0.7))), case)
        ages = simulate(_age_policy(case, 0.8, np.full(6, 0.7)), case)
        assert ages.cost == pytest.approx(two.cost) and ages.starts == two.starts


def _draw(rng: random.Random, ticks: int) -> tuple[bool, ...]:
    """Up spells of mean 1 h; down spells of one tick (70%) or 2 h (30%): most outages end at once,
    the rest last, so a down spell's chance to end falls with its age."""
    out: list[bool] = []
    up = rng.random() < 0.5
    while len(out) < ticks:
        n = max(1, round(rng.expovariate(1 / 15))) if up else (1 if rng.random() < 0.7 else 30)
        out += [up] * n
        up = not up
    return tuple(out[:ticks])


def test_where_an_outage_grows_longer_with_age_the_age_optimum_is_cheaper():
    """On traces of a law whose down spells are one tick or two hours, the optimum told the realized
    spell law by age pays less than the one told the realized two-state chain (the same traces,
    pooled), on average and on most traces: what the bench's age row is for."""
    rng = random.Random(11)
    traces = [_draw(rng, 150) for _ in range(40)]
    downs = [n for tr in traces for n in hc.whole_spells(tr, False)]
    ups = [n for tr in traces for n in hc.whole_spells(tr, True)]
    pooled = hc.realized_chain(tuple(a for tr in traces for a in tr))
    stays = hc.age_stays(downs, 4)
    assert stays[0] == pytest.approx(0.3, abs=0.1)  # most end after their first tick
    assert stays[1:3] == pytest.approx([1.0, 1.0])  # those that do not, last
    age_bills, chain_bills = [], []
    for tr in traces:
        case = _case(tr, work=4.0, deadline=5.0)
        age_bills.append(simulate(_age_policy(case, 1 - 1 / statistics.fmean(ups), stays), case).cost)
        chain_bills.append(simulate(OnlineOptimumPolicy(table_for(case, pooled)), case).cost)
    assert statistics.fmean(age_bills) < 0.995 * statistics.fmean(chain_bills)
    cheaper = sum(a < c - 1e-9 for a, c in zip(age_bills, chain_bills))
    dearer = sum(a > c + 1e-9 for a, c in zip(age_bills, chain_bills))
    assert cheaper >= 3 * dearer + 5, (cheaper, dearer)
