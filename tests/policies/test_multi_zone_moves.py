"""When `multi-zone` moves, on states built by hand (the controller's event-driven mode: hours)."""

from __future__ import annotations

import pytest

from launcher.policies.base import Choice, DecisionState
from launcher.policies.registry import get_placement_policy


def state(t: float, avail: tuple[bool, ...], *, current: Choice, deadline: float, zone: int = 0) -> DecisionState:
    return DecisionState(
        elapsed_hours=t, work_done_hours=0.0, work_total_hours=10.0, deadline_hours=deadline,
        restart_overhead_hours=0.2, current=current, current_zone=zone, spot_available=avail,
        on_demand_price_usd_per_hour=3.0, spot_price_usd_per_hour=1.0,
    )


def test_a_hop_off_on_demand_lands_in_the_zone_whose_spells_are_longest():
    pol = get_placement_policy("multi-zone", prior_up_hours=8.0, prior_weight=1.0)
    od = Choice.ON_DEMAND
    pol.decide(state(0.0, (True, False, False), current=od, deadline=40.0))
    pol.decide(state(1.0, (False, False, False), current=od, deadline=40.0))
    d = pol.decide(state(2.0, (True, False, True), current=od, deadline=40.0))
    # Spells up, by hand: zone 0 one 1 h spell ended, (8 * 1 + 1 + 0) / (1 + 1) = 4.5 h; zone 2 up
    # only now, 8 h (the prior). Both repay a hop (0.2 (1 + 2 * 3 / 2) = 0.8 h), and a hop costs
    # the same wherever it lands: zone 2, although this zone has capacity too.
    assert (d.choice, d.zone) == (Choice.SPOT, 2)
    # With equal spells it stays in its own zone.
    pol = get_placement_policy("multi-zone", prior_up_hours=8.0, prior_weight=1.0)
    d = pol.decide(state(0.0, (True, False, True), current=od, deadline=40.0))
    assert (d.choice, d.zone) == (Choice.SPOT, 0)


def test_idle_it_moves_only_when_waiting_for_its_zone_would_use_up_the_slack_above_the_reserve():
    # Nothing seen yet: zone 0 down, zone 1 up; defaults (prior up 1 h, down 2 h; share of time up
    # 0.8). By hand: expected time to finish waiting for zone 0 = 10 / (0.8 (1 - 0.2 / 1)) = 15.625 h,
    # 5.625 h of it idle, times the margin 2 = 11.25 h. Reserve: hops pay (a hop saves 2 - 1.2 per
    # 0.4 h of slack, 2 per hour, against waiting's 1.4 / 2.2), so 4 O + 2 O * 10 / (1 + 2) = 2.133 h.
    # Binding when 11.25 > slack - 2.133, i.e. slack < 13.38 h.
    for deadline, expected in ((24.0, (Choice.NONE, 0)), (23.5, (Choice.NONE, 0)), (23.3, (Choice.SPOT, 1)),
                               (22.0, (Choice.SPOT, 1))):
        pol = get_placement_policy("multi-zone")
        d = pol.decide(state(0.0, (False, True), current=Choice.NONE, deadline=deadline))
        assert (d.choice, d.zone) == expected, (deadline, d)
        if d.choice is Choice.SPOT:
            assert "use up the slack" in d.reason


def test_the_reserve_counts_the_outages_of_some_zone_having_capacity_when_they_are_more():
    from launcher.policies.safety import budget

    seen = [(0.0, (True, False)), (1.0, (False, False)), (1.5, (False, True)), (2.0, (False, False)),
            (2.5, (False, True)), (3.0, (False, False))]  # fmt: skip
    reserves = {}
    for any_zone in (True, False):
        pol = get_placement_policy("multi-zone", reserve_by_any_zone=any_zone)
        for t, avail in seen:
            st = state(t, avail, current=Choice.ON_DEMAND, deadline=40.0)
            pol.decide(st)
        reserves[any_zone] = pol.reserve(budget(st), st)
    # By hand at hour 3 (prior 1 h up, 2 h down, worth half a spell). Zone 0: up 1 h in 1 ended spell,
    # down 2 h running: u = (0.5 + 1) / 1.5 = 1, d = (1 + 2) / 0.5 = 6, so 10 / 7 outages. "Some zone
    # up": up 1 + 0.5 + 0.5 h in 3 ended spells, down 0.5 + 0.5 h in 2: u = 2.5 / 3.5, d = 2 / 2.5,
    # so 10 / 1.514 outages. Hops pay in zone 0 (a hop saves 2 per hour of slack, a wait 0.23).
    # Reserve = 4 O + 2 O * outages, O = 0.2 h.
    assert reserves[False] == pytest.approx(0.8 + 0.4 * 10 / 7)
    assert reserves[True] == pytest.approx(0.8 + 0.4 * 10 / (2.5 / 3.5 + 2 / 2.5))


def test_idle_away_from_home_it_starts_in_the_home_zone_when_its_spells_are_no_shorter():
    spot, idle = Choice.SPOT, Choice.NONE
    # Priors only (1 h up each): the home zone has capacity, zone 1 none; equal spells: home.
    pol = get_placement_policy("multi-zone")
    d = pol.decide(state(0.0, (True, False), current=idle, deadline=40.0, zone=1))
    assert (d.choice, d.zone) == (spot, 0) and "back to the home zone" in d.reason
    # Even when zone 1 has capacity too: a start is due either way.
    pol = get_placement_policy("multi-zone")
    d = pol.decide(state(0.0, (True, True), current=idle, deadline=40.0, zone=1))
    assert (d.choice, d.zone) == (spot, 0)
    # Zone 1 held for 5 h, home up only now: zone 1's spells (0.5 + 5) / 1.5 = 3.67 h against the
    # home zone's prior 1 h. It waits for zone 1 (slack to spare, not binding), as before.
    pol = get_placement_policy("multi-zone")
    for t in range(10):  # seen every half hour, as the controller and the simulator see every tick
        pol.decide(state(t / 2, (False, True), current=spot, deadline=40.0, zone=1))
    d = pol.decide(state(5.0, (True, False), current=idle, deadline=40.0, zone=1))
    assert (d.choice, d.zone) == (idle, 1), d
    # Both up for 3 h, then zone 1 preempted: home (0.5 + 3) / 0.5 = 7 h >= zone 1's 3.5 / 1.5.
    pol = get_placement_policy("multi-zone")
    for t in range(6):
        pol.decide(state(t / 2, (True, True), current=spot, deadline=40.0, zone=1))
    d = pol.decide(state(3.0, (True, False), current=idle, deadline=40.0, zone=1))
    assert (d.choice, d.zone) == (spot, 0) and "~7.00 h" in d.reason and "~2.33 h" in d.reason
    # Without slack for a spot start the safety net still decides: on-demand where it is.
    pol = get_placement_policy("multi-zone")
    d = pol.decide(state(0.0, (True, False), current=idle, deadline=10.3, zone=1))
    assert d.choice is Choice.ON_DEMAND and "safety net" in d.reason
