"""A job that prints a declared secret (whole, cut across two flushed writes, on stderr) has it
replaced in the logs we store and show (real CLI, local backend); the job's exit code is still
what it exited with, and a controller killed with -9 mid-run loses none of the later lines."""

from __future__ import annotations

import os
import re
import signal
import sys

import pytest
import yaml

from launcher.ledger import Ledger
from tests.cli.launch_helpers import clean_env, wait_for  # noqa: F401
from tests.conftest import run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

SECRET = "tok-9f8e7d6c5b4a"
PRINTER = (
    "import os, sys, time; t = os.environ['API_TOKEN']; print('whole', t, flush=True); "
    "sys.stdout.write('cut ' + t[:5]); sys.stdout.flush(); time.sleep(0.3); sys.stdout.write(t[5:] + ' end\\n'); sys.stdout.flush(); "
    "print('err', t, file=sys.stderr, flush=True)"
)


def _spec(tmp_path, run: str, name: str):
    spec = {
        "name": name, "resources": {"infra": "local"}, "envs": {"PLAIN": "visible-value"},
        "secrets": {"API_TOKEN": SECRET}, "run": run,
        "launcher": {"project": "p", "owner": "ana", "experiment": "e", "expected_hours": 0.01, "budget_usd": 1, "max_restarts": 0},
    }  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _only_run(name: str):
    with Ledger() as led:
        run = next(r for r in led.list_runs() if r.name == name)
        return run, led.attempts(run.run_id)


def test_printed_secret_is_redacted_in_the_stored_log_and_every_view(tmp_path, launcher_home):
    run = f'{sys.executable} -c "{PRINTER}"\necho "plain $PLAIN"\nexit 3\n'
    res = run_cli("launch", str(_spec(tmp_path, run, "leaky")), "--yes", "--cheapest", timeout=120)
    assert res.returncode == 1, res.stderr  # JOB_FAILED: the job's own failure, unchanged by the relay
    run_rec, attempts = _only_run("leaky")
    assert [(a.end_reason, a.exit_code) for a in attempts] == [("failed", 3)]
    expected = ["whole ***", "cut *** end", "err ***", "plain visible-value"]
    log = launcher_home / "runs" / run_rec.run_id / "logs" / "rank-0.log"
    assert log.read_text().splitlines() == expected
    shown = run_cli("logs", run_rec.run_id)
    assert shown.returncode == 0 and shown.stdout.splitlines() == expected
    assert SECRET not in res.stdout + res.stderr  # the terminal view during launch
    assert "cut *** end" in res.stdout + res.stderr
    leaks = [
        str(p.relative_to(launcher_home))
        for p in (launcher_home / "runs").rglob("*")
        if p.is_file() and p.name != "spec.yaml" and SECRET.encode() in p.read_bytes()
    ]
    assert leaks == []  # spec.yaml keeps the values for --resume (0600); nothing else does


def test_controller_killed_mid_run_loses_no_later_line(tmp_path, launcher_home):
    go = tmp_path / "go"
    script = (
        'echo "ready $API_TOKEN"\n'
        f'while [ ! -e {go} ]; do sleep 0.05; done\n'
        'for i in 1 2 3; do echo "after $i $API_TOKEN"; sleep 0.05; done\n'
        f'echo "last line written: $?" >&2'
    )
    res = run_cli("launch", str(_spec(tmp_path, script, "survivor")), "--yes", "--cheapest", "--detach", timeout=120)
    assert res.returncode == 0, res.stderr
    run_id = res.stdout.strip()
    controller_pid = int(re.search(r"controller pid (\d+)", res.stderr).group(1))
    log = launcher_home / "runs" / run_id / "logs" / "rank-0.log"
    try:
        wait_for(lambda: log.exists() and "ready ***\n" in log.read_text(), 60, 0.05, "the readiness line")
        os.kill(controller_pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists(f"/proc/{controller_pid}") or _zombie(controller_pid), 10, 0.05, "the controller to die")
        go.touch()
        wait_for(lambda: "last line written" in log.read_text(), 30, 0.05, "the job's last line")
        assert log.read_text().splitlines() == [
            "ready ***", "after 1 ***", "after 2 ***", "after 3 ***", "last line written: 0",
        ]  # fmt: skip
        shown = run_cli("logs", run_id)
        assert SECRET not in shown.stdout and "after 3 ***" in shown.stdout
    finally:
        run_cli("down", run_id, "--wait", "20", timeout=60)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
