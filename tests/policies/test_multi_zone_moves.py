"""When `multi-zone` moves, on states built by hand (the controller's event-driven mode: hours)."""

from __future__ import annotations

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
