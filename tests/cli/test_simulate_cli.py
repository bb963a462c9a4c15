"""`launcher simulate` end to end: the real CLI on hand-made traces (costs computed by hand), on a
real trace, and on bad input (exit 2 with one readable message)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli_child import run
from tests.conftest import REPO, run_cli

HOUR = 3600


def write_trace(path, pattern: str, gap_seconds: int = HOUR) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap_seconds}, "data": [int(c) for c in pattern]}))


def job(**kw) -> dict:
    base = {"start_tick": 0, "work_hours": 3, "deadline_hours": 7, "overhead_hours": 1,
            "on_demand_price": 3.0, "spot_price": 1.0}
    return {**base, **kw}


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "traces"
    write_trace(r / "zone-a.json", "0011111")
    write_trace(r / "zone-b.json", "1100000")
    write_trace(r / "always.json", "0000000")
    return r


def write_cases(tmp_path, cases) -> str:
    p = tmp_path / "cases.json"
    p.write_text(cases if isinstance(cases, str) else json.dumps(cases))
    return str(p)


def test_json_lines_one_object_per_case(tmp_path, root):
    cases = write_cases(tmp_path, [job(trace="always.json"), job(traces=["zone-a.json", "zone-b.json"])])
    res = run_cli("simulate", "--cases", cases, "--trace-root", str(root), "--policy", "multi-zone", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["case"] for r in rows] == [0, 1] and {r["policy"] for r in rows} == {"multi-zone"}
    # Case 0: spot from t0: 1 overhead + 3 work ticks at $1.
    assert rows[0]["cost"] == pytest.approx(4.0) and rows[0]["hours"] == 4.0
    # Case 1: zone a t0 (overhead), t1 (work); preempted at t2 -> zone b: t2 overhead, t3-t4 work.
    assert rows[1]["cost"] == pytest.approx(5.0)
    assert (rows[1]["preemptions"], rows[1]["switches"], rows[1]["met_deadline"], rows[1]["finished"]) == (
        1, 0, True, True)


def test_baselines_reproduced_by_hand(tmp_path, root, capsys):
    cases = write_cases(tmp_path, [job(trace="zone-a.json")])
    out = {}
    for policy in ("on-demand", "greedy"):
        assert run(["simulate", "--cases", cases, "--trace-root", str(root), "--policy", policy, "--json"]) == 0
        out[policy] = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["on-demand"]["cost"] == pytest.approx(4 * 3.0)
    # greedy: spot t0-t1, preempted at t2 with slack 5 - 2 = 3: waits one tick (3 - 1 >= 2 overheads),
    # then on-demand for good: t3 overhead, t4-t5 work.
    assert out["greedy"]["cost"] == pytest.approx(2 * 1.0 + 3 * 3.0)
    assert out["greedy"]["hours"] == 6.0
    assert out["greedy"]["preemptions"] == 1 and out["greedy"]["met_deadline"]


def test_without_a_capacity_signal_a_probe_finds_the_zone_down(tmp_path, root, capsys):
    """`--no-capacity-signal`: greedy on zone b ('1100000', hourly ticks) is shown the zone never tried
    as available at t0, is refused, probes again at t1 (refused: no capacity until t2), and starts at
    t2; the table and JSON say how many probes were refused (and JSON without the flag has no such field)."""
    cases = write_cases(tmp_path, [job(trace="zone-b.json")])
    args = ["simulate", "--cases", cases, "--trace-root", str(root), "--policy", "greedy", "--json"]
    assert run([*args, "--no-capacity-signal"]) == 0
    blind = json.loads(capsys.readouterr().out.splitlines()[0])
    assert blind["refused"] == 2 and blind["cost"] == pytest.approx(4 * 1.0) and blind["hours"] == 6.0
    assert run(args) == 0
    plain = json.loads(capsys.readouterr().out.splitlines()[0])
    assert "refused" not in plain and plain["cost"] == pytest.approx(4 * 1.0) and plain["hours"] == 6.0
    assert run(args[:-1] + ["--no-capacity-signal"]) == 0
    assert "refused" in capsys.readouterr().out


def test_table_without_json(tmp_path, root, capsys):
    cases = write_cases(tmp_path, [job(trace="always.json")])
    assert run(["simulate", "--cases", cases, "--trace-root", str(root), "--policy", "greedy"]) == 0
    out = capsys.readouterr().out
    assert "met deadline" in out and "greedy" in out and "4.00" in out


@pytest.mark.parametrize(
    ("cases", "policy", "needle"),
    [
        ("[{not json", "greedy", "not valid JSON"),
        ({"trace": "always.json"}, "greedy", "expected a JSON list"),
        ([job(trace="missing.json")], "greedy", "trace not found"),
        ([job(trace="always.json", work_hours=-3)], "greedy", "work_hours"),
        ([job(trace="always.json", overhead_hours=-0.1)], "greedy", "overhead_hours"),
        ([job(trace="always.json", deadline_hours=70)], "greedy", "past the end of the trace"),
        ([job(trace="always.json", colour="red")], "greedy", "colour"),
        ([job()], "greedy", "exactly one of 'trace'"),
        ([job(trace="../outside.json")], "greedy", "outside the trace root"),
        ([job(trace="always.json")], "gredy", "did you mean 'greedy'"),
        # not a finite number of hours, or more than a century: one line, not an overflow
        ('[{"trace": "always.json", "start_tick": 0, "work_hours": Infinity, "deadline_hours": 7, '
         '"overhead_hours": 1, "on_demand_price": 3, "spot_price": 1}]', "greedy", "work_hours: Input should be a finite number"),
        ('[{"trace": "always.json", "start_tick": 0, "work_hours": 3, "deadline_hours": 7, '
         '"overhead_hours": 1, "on_demand_price": 3, "spot_price": NaN}]', "greedy", "spot_price"),
        ([job(trace="always.json", start_tick=2, history_hours=1e308)], "greedy", "history_hours: Input should be less than or equal to"),
        ([job(trace="always.json", overhead_hours=1e308)], "greedy", "overhead_hours"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, root, capsys, cases, policy, needle):
    path = write_cases(tmp_path, cases)
    rc = run(["simulate", "--cases", path, "--trace-root", str(root), "--policy", policy, "--json"])
    captured = capsys.readouterr()
    assert rc == 2
    assert needle in captured.err
    assert captured.out == ""  # nothing simulated before the input was checked


def test_missing_cases_file_and_trace_root(tmp_path, root):
    res = run_cli("simulate", "--cases", str(tmp_path / "nope.json"), "--trace-root", str(root))
    assert res.returncode == 2 and "cases file not found" in res.stderr
    cases = write_cases(tmp_path, [job(trace="always.json")])
    res = run_cli("simulate", "--cases", cases, "--trace-root", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "trace root" in res.stderr


def test_real_trace_with_optimum(shared_data, tmp_path):
    root = shared_data / "spot-traces"
    rel = "availability/1-node/aws-02-15-2023/us-east-1c_v100_1.json"
    cases = write_cases(tmp_path, [job(trace=rel, start_tick=s, work_hours=24, deadline_hours=36,
                                       overhead_hours=0.2, on_demand_price=3.06, spot_price=0.9731)
                                   for s in (0, 5000)])
    lines = {}
    for policy in ("uniform-progress", "deadline-aware"):
        res = run_cli("simulate", "--cases", cases, "--trace-root", str(root), "--policy", policy, "--json",
                      "--optimum")
        assert res.returncode == 0, res.stderr
        lines[policy] = [json.loads(x) for x in res.stdout.splitlines()]
    for rows in lines.values():
        assert [r["case"] for r in rows] == [0, 1]  # one row per case: the loop below checks both
        for r in rows:
            assert r["met_deadline"] and r["finished"]
            assert r["omniscient_cost"] <= r["cost"] + 1e-6
            assert r["cost"] < 24.25 * 3.06  # cheaper than on-demand from the start (1 overhead)


def test_simulation_path_does_not_import_pandas():
    code = (
        "import sys; import launcher.cli.simulate_cmd, launcher.simulation.cases, launcher.policies.registry;"
        "import launcher.policies.deadline_aware, launcher.policies.recovery;"
        "assert 'pandas' not in sys.modules and 'sky' not in sys.modules, 'heavy import'"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_history_hours_give_the_policy_the_trace_before_the_start(tmp_path, capsys):
    """A zone that flapped all the past 100 hours (2 h up, 30 min down), down at the job's start for
    2 h: told that history, `deadline-aware` estimates the zone's spells from it, not from its prior
    alone, and decides otherwise (the bill differs); a negative history is bad input."""
    past = ("0" * 8 + "1" * 2) * 40  # 15-minute ticks, 0 = capacity
    write_trace(tmp_path / "t" / "flap.json", past + "1" * 8 + "0" * 400, gap_seconds=900)
    base = {"trace": "flap.json", "start_tick": len(past), "work_hours": 8, "deadline_hours": 12,
            "overhead_hours": 0.25, "on_demand_price": 3.0, "spot_price": 1.0}  # fmt: skip
    cost = {}
    for hours in (0, 100, 1000):  # 1000: more than lies before the start, which is all there is
        cases = write_cases(tmp_path, [{**base, "history_hours": hours}])
        assert run(["simulate", "--cases", cases, "--trace-root", str(tmp_path / "t"), "--policy", "deadline-aware",
                    "--json"]) == 0  # fmt: skip
        cost[hours] = json.loads(capsys.readouterr().out.splitlines()[0])["cost"]
    assert cost[100] == cost[1000] != cost[0]
    cases = write_cases(tmp_path, [{**base, "history_hours": -1}])
    assert run(["simulate", "--cases", cases, "--trace-root", str(tmp_path / "t"), "--json"]) == 2
    assert "history_hours" in capsys.readouterr().err
