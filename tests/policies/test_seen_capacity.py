"""Capacity a policy was shown but nobody saw (`DecisionState.spot_observed`): a cloud with no
capacity signal, where the controller counts a zone available so the policy tries it. Policies act
on it; their spell estimates learn only from what was seen."""

from __future__ import annotations

import numpy as np

from launcher.policies.base import Choice, DecisionState, any_seen_up, seen_capacity
from launcher.policies.registry import get_placement_policy
from launcher.policies.spells import SpellTracker


def state(t: float, up: bool, seen: bool | None = True, *, done: float = 0.0) -> DecisionState:
    return DecisionState(
        elapsed_hours=t, work_done_hours=done, work_total_hours=10.0, deadline_hours=30.0,
        restart_overhead_hours=0.2, current=Choice.NONE, current_zone=0, spot_available=(up,),
        spot_price_usd_per_hour=1.0, on_demand_price_usd_per_hour=3.0,
        spot_observed=None if seen is None else (seen,),
    )  # fmt: skip


def test_seen_capacity_marks_what_was_not_seen():
    s = DecisionState(0.0, 0.0, 1.0, None, 0.1, Choice.NONE, 0, (True, False, True), spot_observed=(True, True, False))
    assert seen_capacity(s) == (True, False, None)
    assert seen_capacity(state(0.0, True, None)) == (True,)  # the simulator: all seen
    assert any_seen_up((False, None)) is None and any_seen_up((None, True)) is True
    assert any_seen_up((False, False)) is False and any_seen_up((np.bool_(False), np.bool_(True))) is True


def test_the_spell_tracker_runs_a_spell_on_through_what_it_did_not_see():
    seen, blind = SpellTracker(1.0, 1.0), SpellTracker(1.0, 1.0)
    for t, up in [(0.0, False), (1.0, None), (2.0, False), (3.0, True), (5.0, True), (6.0, False)]:
        seen.observe(t, (up,))
        if up is not None:
            blind.observe(t, (up,))
    assert seen.mean_down(0) == blind.mean_down(0) and seen.mean_up(0) == blind.mean_up(0)
    first = SpellTracker(1.0, 1.0)
    first.observe(0.0, (None,))
    first.observe(2.0, (False,))  # first seen at 2 h: no spell ended, nothing before it counted
    first.observe(3.0, (False,))
    assert first.mean_down(0) == (1.0 + 1.0) / 1.0 and first.up_fraction(0, 0.5, 1.0) == 0.5 / 2.0


def test_markov_dp_does_not_learn_from_a_probe_it_was_shown():
    """A zone down for hours, shown available at a probe every half hour: the estimate is that of
    the outage; before, each probe ended a down spell (a refusal a tick, a tick counted as up)."""
    probed, plain = get_placement_policy("markov-dp"), get_placement_policy("markov-dp")
    for p in (probed, plain):
        p.reset()
    for k in range(59):  # ends on a tick that was seen
        t = k / 12
        plain.decide(state(t, False))
        probed.decide(state(t, k % 6 == 5, seen=k % 6 != 5))
    assert probed.model.mean_hours(0) == plain.model.mean_hours(0)
    assert probed.model.mean_hours(0) > 4.0  # the outage, with the prior
    naive = get_placement_policy("markov-dp")
    naive.reset()
    for k in range(59):
        naive.decide(state(k / 12, k % 6 == 5))
    assert naive.model.mean_hours(0) < 1.0  # what counting the probes as seen taught it
