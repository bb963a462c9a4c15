"""Synthetic availability regimes: seeded, in the simulator's format, and shaped as documented."""

from __future__ import annotations

import json
import statistics

import pytest

from launcher.errors import UnknownNameError
from launcher.simulation.synthetic import REGIMES, draw, generate, to_json
from launcher.simulation.traces import parse_trace

GAP_H = 300 / 3600


def up_spells_hours(avail) -> list[float]:
    out, run = [], 0
    for a in avail:
        if a:
            run += 1
        elif run:
            out.append(run * GAP_H)
            run = 0
    return out


def test_same_seed_same_traces_other_seed_other_traces():
    a = generate("flapping", zones=2, hours=48, seed=7)
    assert a == generate("flapping", zones=2, hours=48, seed=7)
    assert a != generate("flapping", zones=2, hours=48, seed=8)


def test_round_trips_through_the_trace_format(tmp_path):
    (t,) = generate("scarce", hours=24, seed=1)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(to_json(t)))
    back = parse_trace(json.loads(p.read_text()), "t")
    assert back.available == t.available and back.gap_seconds == 300.0 and len(back) == 24 * 12


@pytest.mark.parametrize("name", list(REGIMES))
def test_every_regime_has_both_states_over_a_week(name):
    ts = generate(name, zones=3, hours=168, seed=3)
    assert len(ts) == 3
    for t in ts:
        assert any(t.available) and not all(t.available)


def test_regimes_differ_as_documented():
    def mean_up(name):
        return statistics.fmean(s for t in generate(name, zones=3, hours=240, seed=0) for s in up_spells_hours(t.available))

    def availability(name):
        ts = generate(name, zones=3, hours=240, seed=0)
        return statistics.fmean(sum(t.available) / len(t) for t in ts)

    assert mean_up("flapping") < 1.0  # tens of minutes
    assert mean_up("long-outages") > 8.0
    assert availability("scarce") < 0.35
    assert availability("mostly-available") > 0.9


def test_daily_correlated_zones_are_down_together_every_day():
    ts = generate("daily-correlated", zones=3, hours=96, seed=5)
    per_hour = 12
    for day in range(4):
        # 10:00-16:00 lies inside the shared window (9:00 +- 1 h, 8 h long) every day.
        for tick in range((day * 24 + 10) * per_hour, (day * 24 + 16) * per_hour):
            assert not any(t.available[tick] for t in ts), tick


def test_unknown_regime_is_named():
    with pytest.raises(UnknownNameError):
        generate("flaping")


def test_written_traces_run_through_launcher_simulate(tmp_path):
    from launcher.simulation.synthetic import write
    from tests.conftest import run_cli

    paths = write(tmp_path, "independent", zones=2, hours=60, seed=9)
    rel = [str(p.relative_to(tmp_path)) for p in paths]
    assert rel == ["independent/seed9/zone0.json", "independent/seed9/zone1.json"]
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"traces": rel, "start_tick": 0, "work_hours": 12, "deadline_hours": 24,
                                  "overhead_hours": 0.2, "on_demand_price": 3.06, "spot_price": 0.97}]))
    res = run_cli("simulate", "--cases", str(cases), "--trace-root", str(tmp_path), "--policy", "multi-zone", "--json")
    assert res.returncode == 0, res.stderr
    (row,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert row["zones"] == 2 and row["met_deadline"] is True


def test_draw_gives_the_traces_and_the_means_they_were_drawn_with():
    traces, means = draw("flapping", zones=2, hours=600, seed=4)
    assert traces == generate("flapping", zones=2, hours=600, seed=4)
    r = REGIMES["flapping"]
    for t, m in zip(traces, means):
        assert r.up_hours[0] <= m.up_mean_hours <= r.up_hours[1]
        assert r.down_hours[0] <= m.down_mean_hours <= r.down_hours[1]
        # ~1000 spells each way: the realized mean is the drawn one, within tick rounding and noise.
        seen = statistics.fmean(up_spells_hours(t.available))
        assert seen == pytest.approx(m.up_mean_hours, rel=0.1)
    assert means[0] != means[1]
