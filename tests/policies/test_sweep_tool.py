"""`bench/sweep_policies.py`, the parameter sweep behind the tuning figures of docs/policy-experiments.md, run as a command."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.policies.registry import get_placement_policy
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.omniscient import omniscient_cost

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "bench" / "sweep_policies.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


def test_a_sweep_reports_each_combination_against_hand_run_simulations(tmp_path):
    out = tmp_path / "sweep.json"
    p = run("deadline-aware", "--set", "hop_margin=1,2", "--seeds", "0", "--regimes", "flapping", "--workers", "1",
            "--json", str(out))
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())["draws"]["0.0"]
    assert [r["parameters"] for r in rows] == [{"hop_margin": 1}, {"hop_margin": 2}]
    # hop_margin=1 is the default: against deadline-aware with its defaults, exactly 1 on every case.
    assert rows[0]["worst_vs_deadline_aware"] == 1.0 and rows[0]["over_1_02"] == 0
    # The means, recomputed here from the simulator on the same cases.
    sys.path.insert(0, str(REPO / "bench"))
    import bench_policies as bp

    cases = [SimCase(c.traces[:1], *bp._rest(c)) for c, r in bp.synth_tasks((0,), 2) if r == "flapping"]
    for row, margin in zip(rows, (1.0, 2.0)):
        mean = statistics.fmean(simulate(get_placement_policy("deadline-aware", hop_margin=margin), c).cost
                                / omniscient_cost(c) for c in cases)
        assert row["mean_vs_optimum"] == pytest.approx(mean)
        greedy = statistics.fmean(simulate(get_placement_policy("greedy"), c).cost / omniscient_cost(c) for c in cases)
        assert row["behind_greedy"] == pytest.approx(mean - greedy)
    assert "hop_margin=2" in p.stdout and "tuning seeds 0-0" in p.stdout


@pytest.mark.parametrize("args, says", [
    (("deadline-awar",), "did you mean 'deadline-aware'"),
    (("multi-zone", "--set", "bind_margn=1"), "did you mean 'bind_margin'"),
    (("multi-zone", "--set", "bind_margin=-1"), "must be > 0"),
    (("multi-zone", "--set", "bind_margin"), "NAME=V1"),
    (("multi-zone", "--regimes", "flaping"), "did you mean 'flapping'"),
    (("multi-zone", "--seeds", "a-b"), "--seeds wants"),
    (("multi-zone", "--holdout", "--seeds", "0"), "give one"),
    (("multi-zone", "--leads", "-5"), "between 0 and 8760"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2_before_any_case_runs(args, says):
    p = run(*args)
    assert p.returncode == 2
    assert says in p.stderr and "Traceback" not in p.stderr and p.stdout == ""
