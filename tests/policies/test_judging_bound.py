"""`bench/bench_judging_bound.py`'s yardstick: the second generator's zone law it reads, and the online
optimum it solves on that law."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

from launcher.policies.registry import get_placement_policy
from launcher.simulation import synthetic_shifted as gen
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.omniscient import omniscient_cost
from launcher.simulation.online_optimum import OnlineOptimumPolicy, table_for
from launcher.simulation.traces import Trace

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import bench_judging_bound as jb  # noqa: E402

OD, SP = 3.06, 0.9731


def loglik(available: tuple[bool, ...], law: jb.ZoneLaw) -> float:
    """Log-likelihood of a trace's transitions under a law (tick i's step read from index i)."""
    a = np.array(available, dtype=bool)
    stay = np.where(a[:-1], law.p_up_stays[1:], law.p_down_stays[1:])
    p = np.where(a[1:] == a[:-1], stay, 1.0 - stay)
    return float(np.log(np.maximum(p, 1e-300)).sum())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_daily_weekly_law_read_from_the_generator_explains_its_zone_best(seed):
    """The law is read by replaying the generator's draws (the bench stops if they do not regenerate
    zone 0); the formula it builds from them must also fit zone 0's trace better than the laws of
    other draws of the regime (regime-shift is left out: a spell drawn before its shift keeps its
    mean past it, which the bench's chain does not, so its likelihood says little)."""
    trace = gen.generate("daily-weekly", zones=3, hours=jb.mb.HOURS, seed=seed)[0].available
    law = jb.zone0_law("daily-weekly", seed)
    assert len(law.p_up_stays) == len(trace) and 0 < law.p_up_stays.min() and law.p_down_stays.max() < 1
    own = loglik(trace, law)
    assert own > max(loglik(trace, jb.zone0_law("daily-weekly", s)) for s in range(1, 7) if s != seed)


def test_a_generator_that_draws_otherwise_stops_the_bench(monkeypatch):
    """A daily-weekly zone that draws its phase before its memory: the replayed parameters no longer
    build its trace."""
    zone = gen._zone

    def swapped(kind, rng, n, gap_h, shared):
        if kind != "daily-weekly":
            return zone(kind, rng, n, gap_h, shared)
        shift_h, memory_h = rng.uniform(-1.5, 1.5), rng.uniform(0.3, 3.0)
        return gen._markov(rng, n, gap_h, shared["base"], shared["cycle"], memory_h, shift_h)

    jb.zone0_law("daily-weekly", 1)
    monkeypatch.setattr(gen, "_zone", swapped)
    jb.zone0_law.cache_clear()
    with pytest.raises(SystemExit, match="do not regenerate zone 0"):
        jb.zone0_law("daily-weekly", 1)
    with pytest.raises(ValueError, match="no known law"):
        jb.zone0_law("heavy-tail", 1)


def test_the_yardstick_is_best_in_expectation_on_traces_drawn_from_its_law():
    """On traces drawn from a daily-weekly zone's law: never late, its mean bill the DP's expectation
    (1,000 traces: the standard error is about 1%), and no policy's mean lower (paired over the first
    80 of them)."""
    law = jb.zone0_law("daily-weekly", 0)
    rng = np.random.default_rng(7)
    costs: dict[str, list[float]] = {k: [] for k in ("law", "markov-dp", "deadline-aware", "greedy")}
    bills, expected = [], []
    table = None
    for i in range(1000):
        up = [bool(rng.random() < 0.5)]
        for k in range(1, 200):
            stay = law.p_up_stays[k] if up[-1] else law.p_down_stays[k]
            up.append(up[-1] if rng.random() < stay else not up[-1])
        c = SimCase((Trace("drawn", gen.GAP_SECONDS, tuple(up)),), 0, 8.0, 12.0, 0.2, OD, SP)
        if table is None:
            table = table_for(c, jb.window(law, c))
        r = simulate(OnlineOptimumPolicy(table), c)
        assert r.met_deadline and r.cost >= omniscient_cost(c) - 1e-9
        bills.append(r.cost)
        expected.append(table.expected_cost(up[0]))
        if i < 80:
            costs["law"].append(r.cost)
            for name in ("markov-dp", "deadline-aware", "greedy"):
                costs[name].append(simulate(get_placement_policy(name), c).cost)
    assert statistics.fmean(bills) == pytest.approx(statistics.fmean(expected), rel=0.03)
    mean = statistics.fmean(costs["law"])
    for name in ("markov-dp", "deadline-aware", "greedy"):
        assert mean <= statistics.fmean(costs[name]), name


def test_a_per_tick_chain_shorter_than_the_deadline_is_refused():
    c = SimCase((Trace("t", gen.GAP_SECONDS, (True,) * 200),), 0, 8.0, 12.0, 0.2, OD, SP)
    with pytest.raises(ValueError, match="needs 180 steps"):
        table_for(c, (np.full(100, 0.9), np.full(100, 0.9)))
