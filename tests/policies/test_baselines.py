"""Documented behaviour of the baselines and of our policies, traced tick by tick by hand.

Ticks of 1 h, restart overhead 1 tick, spot $1/h, on-demand $3/h; '1' = no spot capacity.
"""

from __future__ import annotations

import pytest

from launcher.errors import UnknownNameError
from launcher.policies.base import Choice, DecisionState
from launcher.policies.deadline_aware import DeadlineAwarePolicy
from launcher.policies.registry import get_placement_policy, names
from launcher.simulation.engine import simulate
from tests.policies.helpers import D, N, S, Recording, case


def run(name: str, c, **params):
    pol = Recording(get_placement_policy(name, **params))
    return simulate(pol, c), pol


def test_registry_names_and_did_you_mean():
    assert {"on-demand", "greedy", "uniform-progress", "deadline-aware", "multi-zone"} <= set(names())
    with pytest.raises(UnknownNameError) as e:
        get_placement_policy("uniform_progress")
    assert "uniform-progress" in (e.value.hint or "")
    assert get_placement_policy("greedy") is not get_placement_policy("greedy")  # fresh objects


def test_on_demand_pays_work_plus_one_overhead():
    r, _ = run("on-demand", case("0000000", work=5, deadline=7, overhead=1))
    assert r.cost == pytest.approx(6 * 3.0) and r.spot_hours == 0 and r.met_deadline


def test_greedy_takes_spot_whenever_available():
    r, _ = run("greedy", case("0" * 10, work=5, deadline=10, overhead=1))
    assert r.cost == pytest.approx(6 * 1.0) and r.on_demand_hours == 0


def test_greedy_waits_until_only_just_enough_time_then_on_demand():
    # slack = 10 - t - 5. Waiting is allowed while slack - 1 >= 2 overheads: t = 0, 1, 2.
    # t3: on-demand (overhead), t4..t8 progress -> done after 9 ticks.
    r, pol = run("greedy", case("1" * 12, work=5, deadline=10, overhead=1))
    assert pol.choices == [N, N, N, D, D, D, D, D, D]
    assert r.cost == pytest.approx(6 * 3.0) and r.hours == 9 and r.met_deadline


def test_greedy_stays_on_demand_for_good_even_when_spot_returns():
    r, pol = run("greedy", case("1111" + "0" * 8, work=5, deadline=10, overhead=1))
    assert pol.choices == [N, N, N, D, D, D, D, D, D]
    assert r.spot_hours == 0


def test_uniform_progress_catches_up_with_hysteresis_then_idles():
    # W = 5, D = 20: ep(t) = t/4. t1 behind -> on-demand; hysteresis keeps it until
    # cp(t) >= ep(t + 2): at t4 cp = 2 >= 1.5 -> idle (ahead of ep(4) = 1). Behind again at t9
    # (ep = 2.25 > 2), released at t12 (cp = 4 >= 3.5); behind at t17; done after t18.
    r, pol = run("uniform-progress", case("1" * 20, work=5, deadline=20, overhead=1))
    expected = [N] + [D] * 3 + [N] * 5 + [D] * 3 + [N] * 5 + [D] * 2
    assert pol.choices == expected
    assert r.cost == pytest.approx(8 * 3.0) and r.hours == 19 and r.met_deadline


def test_uniform_progress_takes_risks_on_spot_and_exploits_it():
    r, pol = run("uniform-progress", case("1100000000", work=3, deadline=10, overhead=1))
    # t0 idle (cp = ep = 0); t1 behind (ep = 0.3) -> on-demand; t2 hysteresis holds (cp 0 < ep(4) = 1.2);
    # t3 cp 1 < ep(5) = 1.5 -> on-demand; t4 cp 2 >= ep(6) = 1.8 -> spot available: take it.
    assert pol.choices[:5] == [N, D, D, D, S]
    assert all(c is S for c in pol.choices[4:])
    assert r.met_deadline and r.switches == 1


def test_deadline_aware_waits_down_to_its_reserve_then_on_demand_and_stays():
    # W = 10, O = 1 h, prices 3 / 1. The zone has never had capacity: its up spells are estimated at
    # the prior, 1 h, shorter than the 1 * (1 + 2 * 3 / 2) = 4 h a hop back from on-demand needs,
    # so no hop is planned and the reserve is the safety net's 2 O = 2, until the outage has lasted
    # 6 O (t >= 6): then one hop is kept, 4 O. Slack = 20 - t; it waits while slack - 1 >= the
    # reserve (t <= 15), then on-demand for the 1 + 10 ticks left.
    r, pol = run("deadline-aware", case("1" * 30, work=10, deadline=30, overhead=1))
    assert pol.choices == [N] * 16 + [D] * 11
    assert r.met_deadline and r.cost == pytest.approx(11 * 3.0)


def test_deadline_aware_hops_back_to_spot_where_greedy_is_stuck_on_demand():
    c = case("1" * 19 + "0" * 20, work=10, deadline=30, overhead=1)
    greedy, _ = run("greedy", c)
    # Spells expected to last 8 h before any is seen (hours-long ticks: a hop must outlast 4 h). The
    # reserve keeps 4 O plus a hop (2 O) per outage expected in the 10 h of work left: at t the
    # outage has lasted t h, so d = (1 + t) / 1 and reserve = 4 + 2 * 10 / (8 + 1 + t); it waits
    # while slack - 1 = 19 - t >= reserve, i.e. t <= 14 (t = 15: 4 < 4.83).
    ours, pol = run("deadline-aware", c, prior_up_hours=8.0, prior_weight=1.0)
    # ours: on-demand t15..t18 (1 overhead + 3 progress), spot from t19 (1 overhead + 7 progress).
    assert pol.choices == [N] * 15 + [D] * 4 + [S] * 8
    assert ours.cost == pytest.approx(4 * 3.0 + 8 * 1.0)
    # greedy: waits to slack 2 (t18), then on-demand to the end although spot is back from t19.
    assert greedy.cost == pytest.approx(11 * 3.0) and greedy.spot_hours == 0
    assert ours.met_deadline and greedy.met_deadline


def test_multi_zone_moves_to_a_zone_with_capacity_after_a_preemption():
    c = case("0011111111", "1100000000", work=5, deadline=9, overhead=1)
    # Hours-long ticks: spells expected to last 8 h, so a start in zone 1 repays its 1 h overhead.
    # At t2, zone 0 has shown one 2 h spell: u = (8 + 2) / 2 = 5, d = 1 (the prior). Waiting for it
    # alone needs d + O + 4 (u + d) / (u - O) = 8 h > the 7 h left: move rather than wait.
    r, pol = run("multi-zone", c, prior_up_hours=8.0, prior_weight=1.0)
    assert [(d.choice, d.zone) for _, d in pol.log] == [(S, 0), (S, 0)] + [(S, 1)] * 5
    assert r.cost == pytest.approx(7 * 1.0) and (r.preemptions, r.switches) == (1, 0)
    single, _ = run("deadline-aware", c)
    assert single.cost > r.cost


def test_multi_zone_prefers_the_zone_whose_capacity_has_been_up_longest():
    c = case("000111111", "100000000", "000000000", work=5, deadline=12, overhead=1)
    _, pol = run("multi-zone", c)
    zones = [d.zone for _, d in pol.log]
    # z2 up since t0, z1 only since t1. (It may first wait a tick for z0: its outages are
    # expected to be short and the slack covers the wait.)
    assert zones[:3] == [0, 0, 0] and next(z for z in zones if z != 0) == 2


def test_continuous_mode_for_the_controller_uses_hours_and_the_poll_step():
    pol = get_placement_policy("deadline-aware")

    def st(deadline, avail):
        return DecisionState(
            elapsed_hours=0.0, work_done_hours=0.0, work_total_hours=10.0, deadline_hours=deadline,
            restart_overhead_hours=0.2, current=Choice.NONE, current_zone=0, spot_available=(avail,),
        )

    # reserve = max(0.4, 0.8 + 1.0) = 1.8 h
    assert pol.decide(st(30.0, False)).choice is Choice.NONE  # 20 h of slack: wait
    assert pol.decide(st(11.85, False)).choice is Choice.ON_DEMAND  # 1.85 - 0.1 < 1.8
    assert pol.decide(st(11.0, True)).choice is Choice.SPOT  # slack 1.0 >= 2 overheads
    assert pol.decide(st(10.3, True)).choice is Choice.ON_DEMAND  # 0.3 < 0.4: no spot start
    assert pol.decide(st(None, False)).choice is Choice.NONE  # no deadline: wait for spot


def test_policy_parameters_are_checked():
    from launcher.errors import BadInputError

    assert get_placement_policy("deadline-aware", reserve_overheads=8).reserve_overheads == 8
    with pytest.raises(BadInputError):
        get_placement_policy("deadline-aware", reserve_work_fraction=-1)
    with pytest.raises(BadInputError):
        get_placement_policy("greedy", colour="red")


def test_deadline_aware_leaves_on_demand_only_when_spells_repay_the_move():
    def st(t, avail, current):
        return DecisionState(
            elapsed_hours=t, work_done_hours=0.0, work_total_hours=10.0, deadline_hours=20.0,
            restart_overhead_hours=0.2, current=current, current_zone=0, spot_available=(avail,),
            spot_price_usd_per_hour=1.0, on_demand_price_usd_per_hour=3.0,
        )

    # Moving pays when spells last longer than 0.2 * (1 + 2 * 3 / (3 - 1)) = 0.8 h (by hand).
    assert DeadlineAwarePolicy.hop_spell_hours(st(0, True, Choice.ON_DEMAND)) == pytest.approx(0.8)
    fresh = get_placement_policy("deadline-aware")  # prior: 4 h spells
    assert fresh.decide(st(0.0, True, Choice.ON_DEMAND)).choice is Choice.SPOT
    flapping = get_placement_policy("deadline-aware")
    for i in range(12):  # capacity flips every 0.1 h: spells of 0.1 h
        flapping.decide(st(i * 0.1, i % 2 == 0, Choice.ON_DEMAND))
    d = flapping.decide(st(1.2, True, Choice.ON_DEMAND))
    assert d.choice is Choice.ON_DEMAND and "would not pay" in d.reason


def test_deadline_aware_keeps_one_hop_when_an_outage_outlasts_the_spells_seen():
    # One 1 h spell, then 30 h without capacity, then capacity for good. W = 20, D = 50, O = 1 h.
    # The spell seen says spells are short (u = (0.5 + 1) / 1.5 = 1 h < the 4 h a hop needs), so no
    # reserve for hops (2 O). But once the outage has lasted 6 O (t >= 7) that spell is no guide:
    # keep 4 O, one hop back. Slack = 30 - t: waits while 29 - t >= 4 (t <= 25), on-demand from t26;
    # spot is back at t31, and the hop pays once u = (1.5 + (t - 31)) / 1.5 >= 4 (t36), with slack
    # 50 - 36 - (20 - 9) = 3 >= 2: spot from t36 (1 overhead + 11 progress), done at t47.
    c = case("0" + "1" * 30 + "0" * 30, work=20, deadline=50, overhead=1)
    ours, pol = run("deadline-aware", c)
    assert pol.choices == [S] + [N] * 25 + [D] * 10 + [S] * 12
    assert ours.cost == pytest.approx(1 * 1.0 + 10 * 3.0 + 12 * 1.0) and ours.met_deadline
    # Without it: waits while 29 - t >= 2 (t <= 27), then on-demand to the end, unable to leave.
    stuck, pol = run("deadline-aware", c, insure_after_overheads=0.0)
    assert pol.choices == [S] + [N] * 27 + [D] * 21
    assert stuck.cost == pytest.approx(1 * 1.0 + 21 * 3.0)


def test_deadline_aware_says_why_it_waits_in_hours_and_names_the_spells_its_reserve_rests_on():
    # The case above: slack = 30 - t h; one 1 h spell seen, so spells up ~1 h ((0.5 x 1 h prior + 1 h)
    # / 1.5 spells), too short for the 4 h a hop needs: the safety net's 2 O; from t = 7 the outage
    # (6 h) has outlasted them by 6 O: one hop kept (4 h); on-demand at t = 26, when waiting would
    # leave 3 h.
    _, pol = run("deadline-aware", case("0" + "1" * 30 + "0" * 30, work=20, deadline=50, overhead=1))
    why = [d.reason for _, d in pol.log]
    assert why[1] == ("slack above reserve (28.00 h after this step >= 2.00 h): wait for spot; the reserve: zone 0 "
                      "spells ~1.00 h up, ~2.00 h down: up too short for a hop back to spot (>= 4.00 h), the safety "
                      "net only")  # fmt: skip
    assert why[7].startswith("slack above reserve (22.00 h after this step >= 4.00 h): wait for spot")
    assert why[7].endswith("but this outage (6.00 h) is far past them: one hop kept")
    assert why[26].startswith("slack at reserve (3.00 h after this step < 4.00 h): on-demand; the reserve: zone 0")
    # Spells long enough for hops (8 h prior): 4 O + a hop per outage expected in the work left.
    _, pol = run("deadline-aware", case("1" * 19 + "0" * 20, work=10, deadline=30, overhead=1), prior_up_hours=8.0,
                 prior_weight=1.0)  # fmt: skip
    assert pol.log[15][1].reason == ("slack at reserve (4.00 h after this step < 4.80 h): on-demand; the reserve: zone "
                                     "0 spells ~8.00 h up, ~17.00 h down: 4 restarts + a hop per outage expected in "
                                     "the 10.0 h of work left")  # fmt: skip

