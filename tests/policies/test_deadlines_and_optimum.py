"""Properties over many cases: no deadline misses when on-demand from the start would meet the
deadline, and the omniscient optimum is a true lower bound (checked against brute force)."""

from __future__ import annotations

import itertools
import random

import pytest

from launcher.policies.registry import get_placement_policy
from launcher.simulation.engine import SimCase, deadline_ticks, overhead_ticks, simulate, work_ticks
from launcher.simulation.omniscient import omniscient_cost
from launcher.simulation.traces import load_trace
from tests.policies.helpers import case

POLICIES = ("on-demand", "greedy", "uniform-progress", "deadline-aware", "multi-zone")
DEADLINE_SAFE = ("greedy", "uniform-progress", "deadline-aware", "multi-zone")


def brute_force_optimum(c: SimCase, multi_zone: bool) -> float | None:
    """Cheapest of every open-loop schedule (the trace is known, so open loop is enough)."""
    g = c.gap_hours
    W, Dl, O = work_ticks(c.work_hours, g), deadline_ticks(c.deadline_hours, g), overhead_ticks(c.overhead_hours, g)
    zones = c.traces if multi_zone else c.traces[:1]
    options = [("N", 0), ("D", 0)] + [("S", z) for z in range(len(zones))]
    best = None
    for seq in itertools.product(options, repeat=Dl):
        held, k, done, cost = None, 0, 0, 0.0
        for t, (ch, z) in enumerate(seq):
            if done >= W:
                break
            if held and held[0] == "S" and not zones[held[1]].available[t]:
                held = None
            if ch == "N":
                held = None
                continue
            if ch == "S" and not zones[z].available[t]:
                break
            key = (ch, z if ch == "S" else 0)
            if held != key:
                held, k = key, O
            cost += c.spot_price if ch == "S" else c.on_demand_price
            if k:
                k -= 1
            else:
                done += 1
        if done >= W and (best is None or cost < best):
            best = cost
    return None if best is None else best * g


def random_case(rng: random.Random, zones: int, n: int, max_work: int) -> SimCase:
    pats = []
    for _ in range(zones):
        up, cur = rng.uniform(0.2, 0.9), rng.random() < 0.5
        s = []
        for _ in range(n):
            if rng.random() < 0.3:
                cur = rng.random() < up
            s.append("0" if cur else "1")
        pats.append("".join(s))
    O = rng.randint(0, 3)
    W = rng.randint(1, max_work)
    Dl = rng.randint(W + O, min(n, W + O + max_work))
    return case(*pats, work=W, deadline=Dl, overhead=O, od=rng.choice([2.0, 3.06]), spot=rng.choice([0.5, 0.9731]))


def test_omniscient_matches_brute_force_on_tiny_cases():
    rng = random.Random(7)
    checked = 0
    for _ in range(60):
        zones = rng.choice([1, 2])
        c = random_case(rng, zones, 6, 3)
        got = omniscient_cost(c, multi_zone=zones > 1)
        want = brute_force_optimum(c, zones > 1)
        assert (got is None) == (want is None)
        if want is not None:
            assert got == pytest.approx(want)
            checked += 1
    assert checked > 40
    # Infeasible: work + one overhead does not fit.
    assert omniscient_cost(case("000", work=3, deadline=3, overhead=1)) is None


def test_no_misses_and_optimum_is_a_lower_bound_on_random_cases():
    rng = random.Random(11)
    for i in range(150):
        zones = rng.choice([1, 1, 2, 3])
        c = random_case(rng, zones, 60, 25)
        opt_single = omniscient_cost(c)
        opt_multi = omniscient_cost(c, multi_zone=True)
        assert opt_multi <= opt_single + 1e-9
        for name in POLICIES:
            pol = get_placement_policy(name)
            r = simulate(pol, c)
            assert r.finished, (i, name)
            if name in DEADLINE_SAFE or name == "on-demand":
                assert r.met_deadline, (i, name, c)
            bound = opt_multi if pol.multi_zone else opt_single
            assert bound <= r.cost + 1e-9, (i, name)


@pytest.fixture(scope="module")
def real_traces(shared_data):
    root = shared_data / "spot-traces"
    return [
        load_trace(root / rel, rel)
        for rel in (
            "availability/1-node/aws-02-15-2023/us-east-1c_v100_1.json",
            "availability/1-node/aws-02-15-2023/us-east-2a_v100_1.json",
            "availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json",
        )
    ]


def test_real_traces_no_misses_optimum_below_all(real_traces):
    for tr in real_traces:
        for start in (0, len(tr) // 2):
            c = SimCase((tr,), start, 24.0, 30.0, 0.2, 3.06, 0.9731)
            opt = omniscient_cost(c)
            for name in POLICIES:
                r = simulate(get_placement_policy(name), c)
                assert r.met_deadline, (tr.name, start, name)
                assert opt <= r.cost + 1e-9


def test_real_multi_zone_group(real_traces):
    c = SimCase(tuple(real_traces[:2]), 200, 24.0, 36.0, 0.2, 3.06, 0.9731)
    r = simulate(get_placement_policy("multi-zone"), c)
    assert r.met_deadline
    assert omniscient_cost(c, multi_zone=True) <= r.cost + 1e-9
    assert omniscient_cost(c, multi_zone=True) <= omniscient_cost(c) + 1e-9
