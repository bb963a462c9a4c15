"""The spell estimator the deadline-aware policies learn from, against hand-computed values."""

from __future__ import annotations

import random

import pytest

from launcher.policies.registry import get_placement_policy
from launcher.policies.spells import SpellTracker
from launcher.simulation.engine import simulate

from .helpers import case


def test_exposure_estimates_by_hand():
    s = SpellTracker(prior_up_hours=1.0, prior_down_hours=2.0, prior_weight=0.5)
    for t, up in ((0, True), (1, True), (2, False), (5, True), (6, True)):
        s.observe(float(t), (up,))
    # Up: the 2 h spell that ended plus the 1 h one still running, over 1 spell ended, with the
    # prior worth half a spell: (0.5 * 1 + 2 + 1) / (0.5 + 1).
    assert s.mean_up(0) == pytest.approx(3.5 / 1.5)
    # Down: one 3 h spell: (0.5 * 2 + 3) / (0.5 + 1).
    assert s.mean_down(0) == pytest.approx(4.0 / 1.5)
    # Share of time up, from 0.8 worth 1 h: (0.8 + 3) / (1 + 6).
    assert s.up_fraction(0, 0.8, 1.0) == pytest.approx(3.8 / 7.0)
    assert s.age(0) == pytest.approx(1.0)
    # A zone up for a day with no spell ended yet is long, whatever the prior says.
    long = SpellTracker(1.0, 2.0, 0.5)
    for hour in range(25):  # seen up every hour
        long.observe(float(hour), (True,))
    assert long.mean_up(0) == pytest.approx((0.5 + 24.0) / 0.5)


def test_two_answers_at_one_instant_are_not_a_spell():
    s = SpellTracker(1.0, 2.0, 0.5)
    s.observe(0.0, (True,))
    s.observe(0.0, (False,))  # the controller may ask twice at one time
    assert s.mean_up(0) == pytest.approx(1.0) and s.mean_down(0) == pytest.approx(2.0)


def test_multi_zone_costs_what_deadline_aware_costs_when_zones_fail_together():
    # Every zone has the same trace: there is never anywhere better to go, so multi-zone must make
    # deadline-aware's decisions and pay its cost, not a cent more.
    rng = random.Random(3)
    spot_hours = 0.0
    for _ in range(20):
        # 10-minute ticks, spells of a few ticks to an hour or so.
        p = "".join("0" * rng.randint(1, 8) + "1" * rng.randint(1, 8) for _ in range(30))[:150]
        c = case(p, p, p, work=10, deadline=rng.choice((12, 15, 20)), overhead=0.5, gap_seconds=600.0)
        one = case(p, work=10, deadline=c.deadline_hours, overhead=0.5, gap_seconds=600.0)
        mz = simulate(get_placement_policy("multi-zone"), c)
        da = simulate(get_placement_policy("deadline-aware"), one)
        assert mz.cost == pytest.approx(da.cost) and mz.met_deadline and da.met_deadline
        spot_hours += da.spot_hours
    assert spot_hours > 0  # the traces did offer spot worth taking


def test_known_spells_answer_the_given_means_whatever_is_seen():
    from launcher.policies.spells import KnownSpells

    s = KnownSpells(((0.4, 0.5),), prior_up_hours=1.0, prior_down_hours=2.0, prior_weight=0.5)
    for t, up in ((0, True), (3, False), (4, True), (10, True)):
        s.observe(float(t), (up, True))
    assert (s.mean_up(0), s.mean_down(0)) == (0.4, 0.5)
    assert s.up_fraction(0, 0.8, 1.0) == pytest.approx(0.4 / 0.9)
    assert s.age(0) == pytest.approx(6.0)  # the clock is still the run's
    # A zone it was not told about is estimated: up since 0 for 10 h, none ended.
    assert s.mean_up(1) == pytest.approx((0.5 * 1.0 + 10.0) / 0.5)
    with pytest.raises(ValueError):
        KnownSpells(((0.0, 1.0),), 1.0, 2.0)


def test_told_flapping_spells_deadline_aware_keeps_no_hop_reserve_where_its_prior_would():
    from launcher.policies.base import Choice, DecisionState
    from launcher.policies.safety import budget

    st = DecisionState(
        elapsed_hours=0.0, work_done_hours=0.0, work_total_hours=24.0, deadline_hours=28.8,
        restart_overhead_hours=0.2, current=Choice.NONE, current_zone=0, spot_available=(False,),
        on_demand_price_usd_per_hour=3.06, spot_price_usd_per_hour=0.9731,
    )
    guess = get_placement_policy("deadline-aware")
    told = get_placement_policy("deadline-aware", known_spells_hours=((0.45, 0.45),))
    for p in (guess, told):
        p.reset()
        p.decide(st)
    b = budget(st)
    # Prior (1 h up, 2 h down): a hop repays its 0.79 h break-even, so slack is kept for the 8
    # outages expected in 24 h. Told 0.45 h spells, no hop pays: only the safety net's 2 O.
    assert guess.reserve(b, st) > 10 * b.overhead
    assert told.reserve(b, st) == pytest.approx(2 * b.overhead)
    # And the told policy keeps them across runs (the simulator resets it before each).
    told.reset()
    assert told.spells.mean_up(0) == 0.45


def test_a_long_unseen_gap_is_not_counted_as_the_state_seen_first():
    """Seen down, then not looked at for 20 h (a run on on-demand), then seen up: the 20 h are no
    evidence of a 20 h outage (the rule `ZoneModel` follows); the minutes between probes are."""
    def tracker(gap_spells):
        s = SpellTracker(1.0, 2.0, 0.5, gap_spells)
        for t in (0.0, 0.1, 0.2):
            s.observe(t, (False,))
        s.observe(20.2, (True,))
        return s

    counted, censored = tracker(None), tracker(3.0)
    assert counted.mean_down(0) == pytest.approx((0.5 * 2.0 + 20.2) / 1.5)
    assert censored.mean_down(0) == pytest.approx((0.5 * 2.0 + 0.2) / 0.5)  # 0.2 h seen, no end
    assert censored.mean_up(0) == pytest.approx(1.0) and censored.age(0) == 0.0
    short = tracker(3.0)
    short.observe(20.5, (False,))  # 0.3 h later: both changes are spells ending
    short.observe(20.6, (True,))
    assert short._ends[0] == [1, 1]
    with pytest.raises(ValueError, match="gap_spells"):
        SpellTracker(1.0, 2.0, 0.5, gap_spells=-1.0)


def test_a_drawn_mean_up_spell_follows_the_estimates_gamma_posterior():
    """`drawn_mean_up` (for `deadline-aware`'s `explore`) draws the rate from Gamma(w + ends, w prior +
    time up): the mean spell of a draw averages beta / (alpha - 1), a little above `mean_up` (beta /
    alpha), and the more spells seen, the tighter the draws around it."""
    import statistics

    t = SpellTracker(1.0, 2.0, 0.5)
    for i, up in enumerate((True, False) * 3):
        t.observe(0.3 * i, (up,))
    alpha = 0.5 + 3  # the prior's half spell and three up spells ended
    rng = random.Random(0)
    few = [t.drawn_mean_up(0, rng) for _ in range(50_000)]
    assert statistics.fmean(few) == pytest.approx(t.mean_up(0) * alpha / (alpha - 1), rel=0.03)
    for i, up in enumerate((True, False) * 60, start=6):
        t.observe(0.3 * i, (up,))
    many = [t.drawn_mean_up(0, rng) for _ in range(50_000)]
    assert statistics.fmean(many) == pytest.approx(t.mean_up(0), rel=0.03)
    spread = lambda xs: statistics.pstdev(xs) / statistics.fmean(xs)  # noqa: E731
    assert spread(many) < 0.5 * spread(few)
