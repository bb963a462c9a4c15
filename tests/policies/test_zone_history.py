"""What the simulator gives a policy as seen before the run (`SimCase.history_ticks`): the trace's
ticks before the job, counted by hand, capped, to every zone the policy plans on, and read by the
model (its reasons name the estimate the history moved)."""

from __future__ import annotations

import pytest

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.policies.registry import get_placement_policy
from launcher.policies.zone_history import MAX_SEED_SPELLS, ZoneHistory, history_of_ticks
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.traces import Trace

G = 0.25
T, F = True, False


def test_history_of_ticks_by_hand():
    h = history_of_ticks([T, T, F, F, F, T, T, F], G)
    assert h == ZoneHistory(up_hours=4 * G, preemptions=2, down_hours=4 * G, recoveries=1)
    assert history_of_ticks([], G) == ZoneHistory(0.0, 0)
    many = history_of_ticks([T, F] * 50, G)  # 50 spells up ended, 49 down (the last still running)
    assert (many.preemptions, many.recoveries) == (50, 49)
    capped = many.capped()  # each side's mean spell kept, at five spells' weight
    assert (capped.preemptions, capped.recoveries) == (MAX_SEED_SPELLS, MAX_SEED_SPELLS)
    assert capped.up_hours == pytest.approx(MAX_SEED_SPELLS * G)
    assert capped.down_hours == pytest.approx(50 * G * MAX_SEED_SPELLS / 49)


class Recorder(PlacementPolicy):
    name = "recorder"
    multi_zone = True

    def reset(self) -> None:
        self.seeds: dict[int, ZoneHistory] = {}

    def seed_history(self, zone: int, history: ZoneHistory) -> None:
        self.seeds[zone] = history

    def decide(self, state: DecisionState) -> Decision:
        return Decision(Choice.ON_DEMAND, 0, "recorder")


def test_the_trace_before_the_start_is_what_the_policy_is_given():
    a = Trace("a", G * 3600, (T, T, F, F, F, T, T, F) + (T,) * 40)
    b = Trace("b", G * 3600, (F,) * 8 + (T,) * 40)
    pol = Recorder()
    for ticks, want_a in ((0, None), (3, history_of_ticks([T, T, F], G)), (8, history_of_ticks(a.available[:8], G)),
                          (100, history_of_ticks(a.available[:8], G))):  # fmt: skip
        simulate(pol, SimCase((a, b), 8, 2.0, 4.0, 0.25, 3.0, 1.0, history_ticks=ticks))
        assert pol.seeds.get(0) == want_a, ticks
    assert pol.seeds[1] == ZoneHistory(0.0, 0, 8 * G, 0)  # every zone it plans on
    simulate(pol, SimCase((a, b), 0, 2.0, 4.0, 0.25, 3.0, 1.0, history_ticks=100))
    assert pol.seeds == {}  # nothing before the first tick
    with pytest.raises(ValueError):
        SimCase((a,), 8, 2.0, 4.0, 0.25, 3.0, 1.0, history_ticks=-1)


@pytest.mark.parametrize("past, down_text", [
    (([T] * 8 + [F] * 96) * 4, "down 27.7 h"),  # four 2 h spells, outages of a day (three seen end)
    (([T] * 8 + [F] * 2) * 40, "down 0.6 h"),  # outages of half an hour, capped at five spells' worth
])  # fmt: skip
def test_markov_dp_reads_the_zone_s_outages_from_its_history(past, down_text):
    trace = Trace("t", G * 3600, tuple(past) + (F,) * 8 + (T,) * 400)
    reasons = {}
    for ticks in (0, len(past)):
        pol = get_placement_policy("markov-dp")
        seen = []
        decide = pol.decide
        pol.decide = lambda s, decide=decide, seen=seen: seen.append(decide(s)) or seen[-1]
        simulate(pol, SimCase((trace,), len(past), 8.0, 12.0, 0.25, 3.0, 1.0, history_ticks=ticks))
        reasons[ticks] = seen[0].reason
    assert "down 2.0 h" in reasons[0]  # the prior alone
    assert down_text in reasons[len(past)], reasons[len(past)]


def test_the_bench_lays_the_job_grid_after_the_lead_in_with_all_before_it_as_history():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import bench_policies as bp
    import bench_zone_history as zh

    from launcher.simulation import synthetic

    week = zh.synth_cases(synthetic, ["long-outages"], (0,), 168.0)
    plain = zh.synth_cases(synthetic, ["long-outages"], (0,), 0.0)
    n = round(168.0 / week[0][1].gap_hours)
    assert len(week) == len(plain) == len(bp.grid(plain[0][1].traces, 2))
    for (_, w), (_, p) in zip(week, plain):
        assert w.history_ticks == w.start_tick == p.start_tick + n  # the lead-in and the ticks before the start
        assert (w.work_hours, w.deadline_hours) == (p.work_hours, p.deadline_hours)
        assert p.history_ticks == p.start_tick  # no lead-in: the past before the start only
    one = zh.row(("tuning", "long-outages", week[0][1]))
    assert set(one) == {"regime", "opt", "markov-dp", "markov-dp + zone history", "deadline-aware",
                        "deadline-aware + zone history", "greedy"}  # fmt: skip
    bills = [v[0] for v in one.values() if isinstance(v, tuple)]
    assert len(bills) == 5 and min(bills) >= one["opt"] - 1e-9  # nothing beats the exact optimum
