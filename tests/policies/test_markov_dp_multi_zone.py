"""`markov-dp-multi-zone`: one step of policy improvement over `markov-dp`'s commit-to-one-zone plans."""

from __future__ import annotations

import pytest

from launcher.policies.base import Choice, DecisionState
from launcher.policies.registry import get_placement_policy
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.omniscient import omniscient_cost
from launcher.simulation.synthetic_shifted import generate as generate_shifted
from launcher.simulation.traces import Trace

GAP_S = 240.0
G = GAP_S / 3600
OD, SP = 3.06, 0.9731


def spells(pattern: list[tuple[bool, float]], hours: float, name: str) -> Trace:
    """A trace repeating (up?, hours) spells."""
    out: list[bool] = []
    while len(out) * G < hours:
        for up, h in pattern:
            out += [up] * round(h / G)
    return Trace(name, GAP_S, tuple(out[: round(hours / G)]))


def test_where_zones_fail_together_it_decides_as_markov_dp():
    """Every zone the same trace: the plans tie, a tie keeps its own zone, so it is `markov-dp`."""
    for regime, seed in (("daily-weekly", 1), ("heavy-tail", 3)):
        tr = generate_shifted(regime, zones=1, hours=40.0, seed=seed)[0]
        single = simulate(get_placement_policy("markov-dp"), SimCase((tr,), 0, 12.0, 18.0, 0.2, OD, SP))
        multi = simulate(get_placement_policy("markov-dp-multi-zone"), SimCase((tr, tr, tr), 0, 12.0, 18.0, 0.2, OD, SP))
        assert multi.met_deadline and multi.cost == pytest.approx(single.cost, rel=1e-9)
        assert multi.spot_hours == pytest.approx(single.spot_hours)


def test_it_moves_to_the_zone_whose_spells_are_long_and_says_why():
    """Home zone: 20 min up in every 2 h; zone 1: 5 h up in every 6 h. Committing to zone 1 is far
    cheaper; `markov-dp` in the home zone can only wait or pay on-demand."""
    home = spells([(True, 1 / 3), (False, 5 / 3)], 60.0, "home")
    good = spells([(False, 1.0), (True, 5.0)], 60.0, "good")
    c = SimCase((home, good), 0, 16.0, 24.0, 0.2, OD, SP)
    single = simulate(get_placement_policy("markov-dp"), c)
    multi = simulate(get_placement_policy("markov-dp-multi-zone"), c)
    assert single.met_deadline and multi.met_deadline
    assert multi.cost < 0.7 * single.cost and multi.spot_hours > 12.0
    assert multi.cost >= omniscient_cost(c, multi_zone=True) - 1e-9
    # The reason of a move names the zone's estimate and what committing to it saves.
    pol = get_placement_policy("markov-dp-multi-zone")
    reasons = []
    for t in range(int(6 / G)):
        avail = (home.available[t], good.available[t])
        d = pol.decide(DecisionState(elapsed_hours=t * G, work_done_hours=0.0, work_total_hours=16.0,
                                     deadline_hours=24.0, restart_overhead_hours=0.2, current=Choice.NONE,
                                     current_zone=0, spot_available=avail, gap_hours=G,
                                     spot_price_usd_per_hour=SP, on_demand_price_usd_per_hour=OD))  # fmt: skip
        if d.choice is Choice.SPOT and d.zone == 1:
            reasons.append(d.reason)
    assert reasons and "zone 1 model: expected up" in reasons[0] and "less than with zone 0's plan" in reasons[0]


def test_it_meets_deadlines_and_never_beats_the_multi_zone_optimum():
    for regime, seed in (("daily-weekly", 1), ("regime-shift", 2), ("zones-fail-together", 4)):
        trs = generate_shifted(regime, zones=3, hours=40.0, seed=seed)
        c = SimCase(tuple(trs), 0, 12.0, 18.0, 0.2, OD, SP)
        r = simulate(get_placement_policy("markov-dp-multi-zone"), c)
        assert r.met_deadline and r.cost >= omniscient_cost(c, multi_zone=True) - 1e-9


def test_bad_move_margin_is_refused():
    from launcher.errors import BadInputError

    with pytest.raises(BadInputError, match="move_margin"):
        get_placement_policy("markov-dp-multi-zone", move_margin=-1.0)
    with pytest.raises(BadInputError, match="stale_hours"):  # `markov-dp`'s own checks still apply
        get_placement_policy("markov-dp-multi-zone", resolve_hours=4.0, stale_hours=2.0)
