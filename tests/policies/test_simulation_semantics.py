"""The simulator's semantics on tiny hand-made traces, with costs computed by hand.

Ticks of 1 h unless noted; spot $1/h, on-demand $3/h; '1' in a trace = no spot capacity.
"""

from __future__ import annotations

import pytest

from launcher.policies.base import Choice
from launcher.policies.registry import get_placement_policy
from launcher.simulation.engine import PolicyBugError, overhead_ticks, simulate
from tests.policies.helpers import D, N, S, Recording, Scripted, case


def test_spot_is_preempted_at_the_start_of_an_unavailable_tick_and_that_tick_is_not_billed():
    # t0 start spot (overhead), t1 progress 1, t2 no capacity -> preempted before deciding,
    # t3 restart (overhead), t4 progress 2, t5 progress 3 = done. Billed: t0, t1, t3, t4, t5.
    pol = Scripted([S, S, N, S, S, S])
    r = simulate(pol, case("0010000", work=3, deadline=7, overhead=1))
    assert r.cost == pytest.approx(5.0)
    assert (r.finished, r.met_deadline, r.hours) == (True, True, 6.0)
    assert (r.preemptions, r.switches, r.starts) == (1, 0, 2)
    at_t2 = pol.seen[2]
    assert at_t2.current is Choice.NONE and at_t2.preemptions == 1 and at_t2.spot_available == (False,)
    assert pol.seen[1].current is Choice.SPOT and pol.seen[1].overhead_remaining_hours == 0.0


def test_restart_overhead_ticks_are_billed_without_progress():
    # overhead 2 h = 2 ticks; work 3 ticks -> 5 ticks billed on-demand.
    pol = Scripted([D] * 5)
    r = simulate(pol, case("11111", work=3, deadline=5, overhead=2))
    assert r.cost == pytest.approx(15.0)
    assert (r.hours, r.met_deadline, r.starts) == (5.0, True, 1)
    # overhead paid in t0 and t1 (the state at t shows what is left after t-1)
    assert [s.overhead_remaining_hours for s in pol.seen] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert [s.work_done_hours for s in pol.seen] == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_work_is_ceiled_deadline_floored_overhead_rounded():
    # gap 0.5 h: work 1.2 h -> ceil(2.4) = 3 ticks; overhead 0.3 h -> round(0.6) = 1 tick.
    kw = dict(work=1.2, overhead=0.3, gap_seconds=1800)
    met = simulate(Scripted([D] * 4), case("1111", deadline=2.2, **kw))  # floor(4.4) = 4 ticks
    assert (met.work_ticks, met.overhead_ticks, met.deadline_ticks) == (3, 1, 4)
    assert met.met_deadline and met.hours == pytest.approx(2.0)
    assert met.cost == pytest.approx(4 * 0.5 * 3.0)
    late = simulate(Scripted([D] * 4), case("1111", deadline=1.9, **kw))  # floor(3.8) = 3 ticks
    assert late.deadline_ticks == 3
    assert late.finished and not late.met_deadline
    assert overhead_ticks(0.25, 0.5) == 0 and overhead_ticks(0.75, 0.5) == 2  # Python round: halves to even


def test_switching_between_on_demand_and_spot_pays_the_overhead_each_way():
    # t0 start on-demand, t1 progress, t2 switch to spot (overhead), t3, t4 progress -> done.
    r = simulate(Scripted([D, D, S, S, S]), case("1100000", work=3, deadline=7, overhead=1))
    assert r.cost == pytest.approx(2 * 3.0 + 3 * 1.0)
    assert (r.switches, r.starts, r.preemptions, r.hours) == (1, 2, 0, 5.0)
    # spot -> on-demand: t0 overhead, t1 progress, t2 switch (overhead), t3, t4 progress.
    r2 = simulate(Scripted([S, S, D, D, D]), case("0000000", work=3, deadline=7, overhead=1))
    assert r2.cost == pytest.approx(2 * 1.0 + 3 * 3.0)
    assert r2.switches == 1 and r2.on_demand_hours == 3.0 and r2.spot_hours == 2.0


def test_moving_between_zones_is_a_switch_with_overhead():
    pol = Scripted([(S, 0), (S, 0), (S, 1), (S, 1), (S, 1)], multi_zone=True)
    r = simulate(pol, case("0001111", "0000000", work=3, deadline=7, overhead=1))
    assert r.cost == pytest.approx(5.0)
    assert (r.switches, r.starts, r.preemptions) == (1, 2, 0)
    assert pol.seen[3].current_zone == 1


def test_idle_is_free_and_going_idle_then_restarting_pays_overhead_again():
    # t0 OD overhead, t1 progress, t2 idle (free), t3 OD overhead again, t4 progress -> done.
    r = simulate(Scripted([D, D, N, D, D]), case("11111", work=2, deadline=5, overhead=1))
    assert r.cost == pytest.approx(4 * 3.0)
    assert (r.starts, r.switches, r.hours) == (2, 0, 5.0)


def test_choosing_spot_without_capacity_is_a_policy_bug():
    with pytest.raises(PolicyBugError):
        simulate(Scripted([S]), case("1", work=1, deadline=1, overhead=0))


def test_single_zone_policies_only_see_the_first_zone():
    pol = Scripted([S, S])
    simulate(pol, case("00", "11", work=2, deadline=2, overhead=0))
    assert all(len(s.spot_available) == 1 for s in pol.seen)


def test_a_late_run_still_finishes_and_counts_as_missed():
    r = simulate(Scripted([D] * 6), case("111111", work=4, deadline=3, overhead=2))
    assert r.finished and not r.met_deadline and r.hours == 6.0


def test_policy_sees_tick_quantized_hours():
    pol = Scripted([D] * 3)
    simulate(pol, case("111", work=0.9, deadline=1.6, overhead=0.3, gap_seconds=1800))
    s = pol.seen[0]
    assert (s.work_total_hours, s.deadline_hours, s.restart_overhead_hours, s.gap_hours) == (1.0, 1.5, 0.5, 0.5)


def test_without_a_capacity_signal_the_policy_sees_what_a_run_sees_and_probes():
    """`capacity_signal=False`: spot reclaimed at tick 2, back at tick 12 (5-minute ticks). Greedy is
    shown the zone available but not seen at the start (never tried) and at each probe, and down
    (seen) from the preemption until a probe is due: one tick
    after the first miss, then 2, then at most 16 min (3.2 ticks) apart. The probes at ticks 3, 5
    and 9 are refused (nothing held, nothing billed); the one at tick 13 finds capacity, a tick
    after it came back."""
    c = case("00" + "1" * 10 + "0" * 40, work=0.5, deadline=4.0, overhead=0.0, gap_seconds=300)
    rec = Recording(get_placement_policy("greedy"))
    r = simulate(rec, c, capacity_signal=False)
    shown = [(s.spot_available[0], None if s.spot_observed is None else s.spot_observed[0]) for s, _ in rec.log]
    probes = [t for t, (up, seen) in enumerate(shown) if up and not seen]
    assert probes[:5] == [0, 3, 5, 9, 13] and all(shown[t] == (False, True) for t in (2, 4, 6, 7, 8, 10, 11, 12))
    assert r.refused == 3 and r.preemptions == 1 and r.starts == 2
    held = [d.choice for _, d in rec.log]
    assert held[13] is S and r.cost == pytest.approx((2 + (6 - 2)) * 1.0 * 300 / 3600)  # 2 ticks + the rest of the work on spot
    plain = simulate(get_placement_policy("greedy"), c)
    assert plain.refused == 0 and plain.hours < r.hours  # with the signal it restarts at tick 12
