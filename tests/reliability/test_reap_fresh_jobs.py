"""The nightly reaper never reaps a job that just started: idle evidence must cover the window
it claims, and the reason says how much of it the figure covers (the real CLI, local backend)."""

from __future__ import annotations

import json
import time

import pytest

from launcher.ledger import Ledger
from tests.conftest import run_cli

SPEC = """name: {name}
resources: {{cpus: 1+}}
run: sleep 60
launcher: {{project: fresh, owner: ana, experiment: e, expected_hours: 0.02, budget_usd: 1}}
"""


def _launch(tmp_path, name: str) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(SPEC.format(name=name))
    res = run_cli("launch", str(p), "--detach", "--yes", "--cheapest", timeout=120)
    assert res.returncode == 0, res.stderr
    with Ledger() as led:
        return next(r.run_id for r in led.list_runs() if r.name == name)


def _wait_running(run_ids: list[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with Ledger() as led:
            if all(led.get_run(r).state == "running" for r in run_ids):
                return
        time.sleep(0.3)
    pytest.fail(f"runs {run_ids} not running after {timeout_s} s")


@pytest.mark.slow
def test_fresh_jobs_are_kept_even_with_zero_grace(tmp_path):
    runs = [_launch(tmp_path, f"fresh{i}") for i in range(2)]
    policy = tmp_path / "reap.yaml"
    policy.write_text("providers: [local]\ndefaults: {grace_minutes: 0}\n")
    try:
        _wait_running(runs)
        for _ in range(2):  # grace 0 acts on the next pass: a second pass must still keep them
            res = run_cli("reap", "--policy", str(policy), "--json", timeout=120)
            assert res.returncode == 0, res.stderr
            outcomes = json.loads(res.stdout)
            assert len(outcomes) == 2, outcomes
            assert {o["decision"] for o in outcomes} == {"keep"}, outcomes
            for o in outcomes:
                cpu = next(r for r in o["reasons"] if r.startswith("cpu-utilization: "))
                assert "of the 60 min window" in cpu and "too little history" in cpu, cpu
                assert not any(r.startswith("ledger: ledger:") for r in o["reasons"]), o["reasons"]
        with Ledger() as led:
            assert [led.get_run(r).state for r in runs] == ["running", "running"]
    finally:
        for r in runs:
            run_cli("down", r, "--wait", "20", timeout=60)
