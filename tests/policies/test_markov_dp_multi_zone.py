"""`markov-dp-multi-zone`: one step of policy improvement over `markov-dp`'s commit-to-one-zone plans."""

from __future__ import annotations

import pytest

from launcher.policies.base import Choice, DecisionState
from launcher.policies.registry import get_placement_policy
from launcher.policies.zone_history import ZoneHistory
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
    for flag in ("anchor_home", "price_stand_in"):
        with pytest.raises(BadInputError, match=f"{flag} must be true or false, got 'no'"):
            get_placement_policy("markov-dp-multi-zone", **{flag: "no"})


def _home_choice(pol, state: DecisionState) -> Choice | None:
    """What the home zone's plan would do at this decision (None: no plan yet)."""
    from launcher.policies.safety import snap_to_tick

    plan = pol.plans.get(pol._home)
    if plan is None:
        return None
    s = snap_to_tick(state)
    held = Choice.ON_DEMAND if s.current is Choice.ON_DEMAND else Choice.NONE
    owed = s.overhead_remaining_hours if held is Choice.ON_DEMAND else 0.0
    return plan.at(s, held, owed, s.spot_available[pol._home])[0]


def test_the_home_plan_decides_and_other_zones_spot_only_stands_in_for_its_waiting_or_on_demand():
    """At every decision of a three-zone run: where the home plan runs spot, so does the run, at
    home (or it keeps a live spot cluster); a spot start elsewhere comes only where the home plan
    would wait or pay for on-demand, and its reason says whose plan it stands in for."""
    checked = {"stand-ins": 0, "home spot": 0}
    short = spells([(True, 1 / 3), (False, 5 / 3)], 40.0, "home")  # home spells too short to pay
    long = spells([(False, 1.0), (True, 5.0)], 40.0, "good")
    cases = [tuple(generate_shifted(regime, zones=3, hours=40.0, seed=seed))
             for regime, seed in (("mixed", 3), ("regime-shift", 1))]
    for trs in (*cases, (short, long)):
        pol = get_placement_policy("markov-dp-multi-zone")

        class Checked:
            name, multi_zone = pol.name, True

            def reset(self):
                pol.reset()

            def decide(self, state):
                d = pol.decide(state)
                home = _home_choice(pol, state)
                live = state.current is Choice.SPOT and state.spot_available[state.current_zone]
                if live or home is None or d.reason.startswith("no model plan"):
                    return d
                if d.choice is Choice.SPOT and d.zone != pol._home:
                    assert home is not Choice.SPOT, (state, d)
                    assert f"stands in for zone {pol._home}'s plan" in d.reason, d.reason
                    checked["stand-ins"] += 1
                if home is Choice.SPOT:
                    assert d.choice is Choice.SPOT and d.zone == pol._home, (state, d)
                    checked["home spot"] += 1
                return d

        r = simulate(Checked(), SimCase(trs, 0, 12.0, 18.0, 0.2, OD, SP))
        assert r.met_deadline
    assert checked["stand-ins"] > 0 and checked["home spot"] > 0, checked


def test_a_move_made_on_a_wrong_estimate_no_longer_costs_the_home_plan_its_slack():
    """Second generator, mixed regime, seed 3 (a judging case of the bench): with plans on the
    posterior mean (the default), acting by whichever zone's commitment looked cheapest
    (`anchor_home=False`) moved on an early, rosy estimate of another zone, waited there while the
    home zone had capacity, and paid 1.47x single-zone `markov-dp`; anchored to the home plan it
    costs less than single-zone `markov-dp`, with plans on the mean or over the posterior's spread
    (`scenarios` 3, with which the rosy estimate is not taken at its word either)."""
    trs = generate_shifted("mixed", zones=3, hours=130.0, seed=3)
    c = SimCase(tuple(trs), 0, 24.0, 28.8, 0.2, OD, SP)
    for params in ({}, {"scenarios": 3}):
        single = simulate(get_placement_policy("markov-dp", **params), SimCase(tuple(trs[:1]), 0, 24.0, 28.8, 0.2, OD, SP))
        free = simulate(get_placement_policy("markov-dp-multi-zone", anchor_home=False, **params), c)
        anchored = simulate(get_placement_policy("markov-dp-multi-zone", **params), c)
        assert single.met_deadline and free.met_deadline and anchored.met_deadline
        if not params:
            assert free.cost > 1.3 * single.cost
        else:
            assert free.cost < single.cost
        assert anchored.cost <= single.cost, params


def test_a_stand_in_is_priced_as_spot_there_until_preempted_then_the_home_plan():
    """Home zone down, zone 1 up. If zone 1's model is sure its capacity stays, a stand-in costs spot
    for the work left plus one restart; if it is sure spells end at once, a stand-in buys nothing
    but restarts and slack, and costs more than following the home plan."""
    import math

    from launcher.policies.availability_model import ZoneModel

    pol = get_placement_policy("markov-dp-multi-zone")
    t, state = 0, None
    while 0 not in pol.plans or 0 in pol._solves:
        state = DecisionState(elapsed_hours=t * G, work_done_hours=0.0, work_total_hours=8.0, deadline_hours=12.0,
                              restart_overhead_hours=0.2, current=Choice.NONE, current_zone=0,
                              spot_available=(False, True), gap_hours=G, spot_price_usd_per_hour=SP,
                              on_demand_price_usd_per_hour=OD)  # fmt: skip
        pol.decide(state)
        t += 1
    plan, tab = pol.plans[0], pol.plans[0].table
    sure = ZoneModel(1.0, 2.0, 0.5, 2.0)
    sure.seed(ZoneHistory(1e9, 0))
    pol.models[1] = sure
    ticks = tab.O + math.ceil(8.0 / plan.g - 1e-6)
    assert pol._stand_in_cost(state, 1) == pytest.approx(SP * plan.g * ticks, rel=1e-3)
    brief = ZoneModel(1.0, 2.0, 0.5, 2.0)
    brief.seed(ZoneHistory(1.0, 1000))  # spells of about 4 seconds
    pol.models[1] = brief
    home = plan.at(state, Choice.NONE, 0.0, False)[1]
    assert math.isfinite(home) and pol._stand_in_cost(state, 1) > home
