"""`launch` through the real CLI entry point (subprocesses): end to end on the local backend,
every bad-input path (nothing written), dry run, budget refusal, confirmation, multi-rank
output, crash (kill -9) then status/down/resume, and ten concurrent launches."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.cli.launch_helpers import (  # noqa: F401
    clean_env, cli_inproc, files_under, ledger_attempts, ledger_runs, pid_gone, popen_cli, runs_json, state_files,
    wait_for, write_spec,
)  # fmt: skip
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

TINY = """
name: tiny
resources: {cpus: 1}
run: echo "hi from $LAUNCHER_RUN_ID"
launcher: {project: t, expected_hours: 0.01}
"""


def test_quickstart_end_to_end(launcher_home):
    r = run_cli("launch", "task_specs/quickstart.yaml", "--cheapest", "--yes")
    assert r.returncode == 0, r.stderr
    assert "hello from rank 0 of 1" in r.stdout  # the job's output, live on stdout
    assert "setup on rank 0" in r.stdout
    assert "Plan for 'quickstart'" in r.stderr and "chosen:   local (this machine" in r.stderr
    (run,) = runs_json()  # the read command, through the CLI
    assert run["state"] == "succeeded" and run["project"] == "examples" and run["attempts"] == 1
    log = (launcher_home / "runs" / run["run_id"] / "logs" / "rank-0.log").read_text()
    assert "hello from rank 0 of 1" in log


def test_launch_console_script_is_launcher_launch(tmp_path, launcher_home):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / "launch"
    if not exe.exists():
        exe = shutil.which("launch")
    if not exe:
        pytest.skip("`launch` console script not installed")
    spec = write_spec(tmp_path, TINY)
    r = subprocess.run([str(exe), str(spec), "--cheapest", "--yes"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "hi from r-" in r.stdout


BAD_SPECS = {
    "unknown_key": ("name: t\nrun: x\nresorces: {cpus: 1}\n", "did you mean 'resources'"),
    "unknown_gpu": ("resources: {accelerators: 'T5:1'}\nrun: x\n", "unknown GPU 'T5'"),
    "bad_deadline": ("run: x\nlauncher: {deadline: tomorrow}\n", "malformed duration"),
    "unknown_recovery": ("run: x\nlauncher: {recovery: nxt-offer}\n", "unknown recovery policy"),
    "missing_workdir": ("workdir: ./nope\nrun: x\n", "workdir"),
    "missing_data": ("run: x\nlauncher: {data: [./no-such-data]}\n", "does not exist"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_exits_2_and_writes_nothing(case, tmp_path, launcher_home, capsys):
    text, needle = BAD_SPECS[case]
    spec = write_spec(tmp_path, text)
    code, out, err = cli_inproc(capsys, "launch", str(spec), "--cheapest", "--yes")
    assert code == 2, (code, err)
    assert needle in err
    assert err.count("error:") == 1 and "Traceback" not in err and out == ""
    assert files_under(launcher_home) == []


def test_bad_spec_through_the_real_entry_point(tmp_path, launcher_home):
    spec = write_spec(tmp_path, BAD_SPECS["unknown_key"][0])
    r = run_cli("launch", str(spec), "--cheapest", "--yes")
    assert r.returncode == 2 and "did you mean 'resources'" in r.stderr
    assert files_under(launcher_home) == []


@pytest.mark.parametrize(
    "args, needle",
    [
        (["does-not-exist.yaml"], "does not exist"),
        (["task_specs/quickstart.yaml", "--cloud", "aws2"], "unknown cloud 'aws2'"),
        (["task_specs/quickstart.yaml", "--simulate-preemptions", "soon"], "--simulate-preemptions takes N"),
        (["task_specs/train.yaml", "--cloud", "aws"], "no offer"),
        (["task_specs/quickstart.yaml", "--ssh-cidr", "my-ip"], "is not a network"),
        ([], "missing task spec"),
    ],
)
def test_bad_flags_exit_nonzero_and_write_nothing(args, needle, launcher_home, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, _, err = cli_inproc(capsys, "launch", *args, "--yes")
    assert code in (2, 4), err  # 4 = credentials (aws named, none present)
    assert needle in err
    assert files_under(launcher_home) == []


def test_a_cloud_with_credentials_but_no_provider_is_refused_before_anything_is_written(
    tmp_path, launcher_home, capsys, monkeypatch
):
    """Lambda credentials and Lambda the cheapest A100 in the catalog: the launch must not plan on
    it (there is no Lambda provider), refuse with exit 2 and one message, and record no run."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no other cloud's credentials
    for var in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LAMBDA_API_KEY", "lk-not-a-real-key")
    spec = write_spec(tmp_path, "name: t\nresources: {accelerators: A100:1}\nrun: x\n"
                      "launcher: {project: p, owner: o, cost_center: c}\n")  # fmt: skip
    for extra in ((), ("--cloud", "lambda")):
        code, _, err = cli_inproc(capsys, "launch", str(spec), "--cheapest", "--yes", *extra)
        assert code == 2, err
        assert "lambda" in err and ("no provider" in err or "no launch runs there" in err)
        assert "lk-not-a-real-key" not in err and "Traceback" not in err
        assert files_under(launcher_home) == []


def test_dry_run_prints_the_plan_and_writes_nothing(launcher_home, capsys):
    code, out, err = cli_inproc(capsys, "launch", str(REPO / "task_specs" / "train.yaml"), "--dry-run")
    assert code == 0, err
    assert "Plan for 'train-digits'" in err and "expected: $0.00" in err
    assert "aws has no credentials" in err
    assert "dry run" in err and out == ""
    assert files_under(launcher_home) == []


def test_gpu_offer_beats_local_when_a_cloud_is_enabled(monkeypatch, launcher_home, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, _, err = cli_inproc(capsys, "launch", str(REPO / "task_specs" / "train.yaml"), "--dry-run")
    assert code == 0, err
    chosen = next(line for line in err.splitlines() if "chosen:" in line)
    assert chosen.split()[1].startswith("aws/") and ("T4:1" in chosen or "L4:1" in chosen)
    assert state_files(launcher_home) == []  # (pricing may cache the parsed catalog)


def test_budget_refusal_exits_3_and_writes_nothing(tmp_path, monkeypatch, launcher_home, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    spec = write_spec(
        tmp_path,
        """
        resources: {accelerators: 'L4:1', infra: aws}
        run: python train.py
        launcher: {budget_usd: 0.5, expected_hours: 100}
        """,
    )
    code, _, err = cli_inproc(capsys, "launch", str(spec), "--cheapest", "--yes")
    assert code == 3, err
    assert "exceeds the task's budget_usd $0.50" in err
    assert state_files(launcher_home) == []


def test_no_yes_and_no_stdin_refuses(tmp_path, launcher_home):
    import subprocess
    import sys

    spec = write_spec(tmp_path, TINY)
    r = subprocess.run(
        [sys.executable, "-m", "launcher.cli.main", "launch", str(spec), "--cheapest"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=str(REPO),
    )  # fmt: skip
    assert r.returncode == 3 and "pass --yes" in r.stderr
    assert files_under(launcher_home) == []


def test_answer_on_stdin_confirms(tmp_path, launcher_home):
    import subprocess
    import sys

    spec = write_spec(tmp_path, TINY)
    r = subprocess.run(
        [sys.executable, "-m", "launcher.cli.main", "launch", str(spec), "--cheapest"],
        input="y\n", capture_output=True, text=True, timeout=60, cwd=str(REPO),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Launch? [Y/n]" in r.stderr and "hi from r-" in r.stdout


def test_failed_job_exits_1_and_setup_failure_says_so(tmp_path):
    spec = write_spec(tmp_path, "run: echo boom; exit 4\nlauncher: {max_restarts: 1}\n")
    r = run_cli("launch", str(spec), "--yes")
    assert r.returncode == 1 and "job failed with exit code 4" in r.stderr
    assert r.stdout.count("boom") == 2  # first try + one restart
    spec2 = write_spec(tmp_path, "setup: exit 9\nrun: echo never\n", name="s.yaml")
    r2 = run_cli("launch", str(spec2), "--yes")
    assert r2.returncode == 1 and "setup failed with exit code 9" in r2.stderr and "never" not in r2.stdout


def test_multi_rank_output_is_prefixed_and_env_is_per_rank(tmp_path):
    spec = write_spec(
        tmp_path,
        """
        num_nodes: 3
        run: |
          echo "rank=$SKYPILOT_NODE_RANK nodes=$SKYPILOT_NUM_NODES ips=$(echo "$SKYPILOT_NODE_IPS" | wc -l)"
        """,
    )
    r = run_cli("launch", str(spec), "--yes")
    assert r.returncode == 0, r.stderr
    for rank in range(3):
        assert f"(rank {rank}) rank={rank} nodes=3 ips=3" in r.stdout.splitlines()


def counter_spec(to: int, extra: str = "") -> str:
    """A job that counts to `to`, checkpointing its counter; on SIGTERM it saves and exits 75."""
    return f"""
        name: counter
        run: |
          f=$LAUNCHER_CHECKPOINT_DIR/step; i=$(cat $f 2>/dev/null || echo 0)
          echo "attempt $LAUNCHER_ATTEMPT resumes at $i"
          trap 'echo $i > $f; exit 75' TERM
          while [ $i -lt {to} ]; do i=$((i+1)); sleep 0.05; done
          echo "done at $i"
        {extra}
        """


def test_simulated_preemptions_recover_and_resume_from_checkpoint(tmp_path):
    # A job that counts to 30, checkpointing its counter; on SIGTERM it saves and exits 75.
    spec = write_spec(tmp_path, counter_spec(30, "launcher: {expected_hours: 0.01}"))
    r = run_cli("launch", str(spec), "--yes", "--simulate-preemptions", "0.5,0.5", "--grace-seconds", "5")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    starts = [int(line.split()[-1]) for line in lines if "resumes at" in line]
    # Non-decreasing, not strictly increasing: how far each attempt counts in its 0.5 s depends
    # on machine load. That each resume continues from real progress is shown on a clock driven
    # by the job's events in tests/integration/test_trace_real_job.py.
    assert len(starts) == 3 and starts[0] == 0 and starts == sorted(starts) and starts[2] < 30
    assert lines[-1] == "done at 30"
    (run,) = ledger_runs()
    attempts = ledger_attempts(run.run_id)
    assert [a.end_reason for a in attempts] == ["preempted", "preempted", "completed"]
    assert [a.spot for a in attempts] == [True, True, True]
    from launcher.ledger import Ledger

    with Ledger() as led:
        assert len(led.events(run.run_id, kind="preemption")) == 2


def _start_long_job(tmp_path, extra=()):
    spec = write_spec(
        tmp_path,
        """
        name: long
        run: |
          echo "attempt $LAUNCHER_ATTEMPT pid $$"
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then sleep 300; fi
          echo finished
        """,
    )
    proc = popen_cli("launch", str(spec), "--yes", "--grace-seconds", "2", *extra)
    line = proc.stdout.readline()
    assert line.startswith("attempt 1 pid "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, int(line.split()[-1])


def test_kill_9_leaves_an_orphan_that_status_shows_and_resume_finishes(tmp_path):
    proc, job_pid = _start_long_job(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert not pid_gone(job_pid)  # the job survives its controller (own session)
    st = json.loads(run_cli("status", "--json").stdout)["runs"]
    assert len(st) == 1 and st[0]["state"] == "running" and st[0]["controller"] == "orphaned"
    assert "is gone" in st[0]["controller_detail"]
    r = run_cli("launch", "--resume", st[0]["run_id"][:12])
    assert r.returncode == 0, r.stderr
    assert "attempt 2 pid" in r.stdout and "finished" in r.stdout
    wait_for(lambda: pid_gone(job_pid), 10, what="old job to be stopped")
    assert ledger_runs()[0].state == "succeeded"
    assert [a.end_reason for a in ledger_attempts(st[0]["run_id"])] == ["abandoned", "completed"]


def test_kill_9_then_down_cleans_up(tmp_path):
    proc, job_pid = _start_long_job(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    (run,) = ledger_runs()
    r = run_cli("down", run.run_id)
    assert r.returncode == 0, r.stderr
    assert "cleaned up" in r.stderr
    wait_for(lambda: pid_gone(job_pid), 10, what="job to be killed")
    assert ledger_runs()[0].state == "cancelled"
    assert [a.end_reason for a in ledger_attempts(run.run_id)] == ["abandoned"]
    assert run_cli("launch", "--resume", run.run_id).returncode == 6  # ended: nothing to resume


def test_resume_refuses_while_the_controller_lives(tmp_path):
    proc, job_pid = _start_long_job(tmp_path)
    try:
        (run,) = ledger_runs()
        r = run_cli("launch", "--resume", run.run_id)
        assert r.returncode == 6 and "live controller" in r.stderr
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the controller cancels the run cleanly
        assert proc.wait(30) == 130
    wait_for(lambda: pid_gone(job_pid), 10, what="job stopped by Ctrl-C")
    assert ledger_runs()[0].state == "cancelled"


@pytest.mark.slow
def test_ten_concurrent_launches_are_all_recorded(tmp_path):
    spec = write_spec(tmp_path, TINY)
    procs = [popen_cli("launch", str(spec), "--yes") for _ in range(10)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 10, [o[1][-500:] for o in outs]
    runs = ledger_runs()
    assert len(runs) == 10 and {r.state for r in runs} == {"succeeded"}
    ids = {r.run_id for r in runs}
    assert len(ids) == 10
    # each job printed its own run id
    assert {o[0].strip().split()[-1] for o in outs} == ids


def test_project_budget_in_budgets_yaml_refuses(tmp_path, monkeypatch, launcher_home, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    (launcher_home / "budgets.yaml").write_text("budgets:\n  - project: vision\n    monthly_limit_usd: 0.1\n")
    spec = write_spec(
        tmp_path,
        """
        resources: {accelerators: 'L4:1', infra: aws}
        run: python train.py
        launcher: {project: vision, expected_hours: 10}
        """,
    )
    code, _, err = cli_inproc(capsys, "launch", str(spec), "--cheapest", "--yes")
    assert code == 3, err
    assert "left in budget" in err and "$0.10" in err
    assert [f for f in state_files(launcher_home) if f != "budgets.yaml"] == []
    # another project is not limited by it
    other = write_spec(tmp_path, "name: o\nresources: {accelerators: 'L4:1', infra: aws}\nrun: x\nlauncher: {project: nlp, owner: a, cost_center: c}\n", name="o.yaml")
    assert cli_inproc(capsys, "launch", str(other), "--dry-run")[0] == 0


def test_spot_trace_flags_reach_the_local_backend(tmp_path):
    # The flags' wiring only: a trace with capacity throughout makes the local offer simulated
    # spot, and the job runs once to completion. Capacity coming and going with a real job is
    # tests/integration/test_trace_real_job.py, on a clock that moves on the job's events (a
    # wall-clock trace here would race the job's start on a loaded machine).
    trace = tmp_path / "trace.json"
    trace.write_text('{"metadata": {"gap_seconds": 3600}, "data": [1, 0, 0]}')
    spec = write_spec(tmp_path, counter_spec(5))
    r = run_cli("launch", str(spec), "--yes", "--simulate-trace", str(trace), "--trace-start-tick", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "done at 5"
    (run,) = ledger_runs()
    assert [(a.spot, a.end_reason) for a in ledger_attempts(run.run_id)] == [(True, "completed")]

def test_repeated_spot_traces_are_zones_the_placement_policy_moves_between(tmp_path):
    # Two zones of simulated spot capacity on the local backend: zone-a (ranked first) has capacity
    # for the first 3 s of the run, zone-b throughout. The deadline leaves slack just under the
    # reserve `multi-zone` keeps (4 restarts of 5 min), so once zone-a's capacity goes it does not
    # wait for it: it moves the real job to zone-b, which resumes from its checkpoint.
    a, b = tmp_path / "zone-a.json", tmp_path / "zone-b.json"
    a.write_text('{"metadata": {"gap_seconds": 60}, "data": [0, 0, 0%s]}' % (", 1" * 2000))
    b.write_text('{"metadata": {"gap_seconds": 60}, "data": [0]}')
    spec = write_spec(tmp_path, counter_spec(200, "launcher: {deadline: 25m, expected_hours: 0.05}"))
    r = run_cli("launch", str(spec), "--yes", "--simulate-trace", str(a), "--simulate-trace", str(b),
                "--trace-speedup", "60", "--simulate-price", "1,3", "--grace-seconds", "5", timeout=180)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "done at 200"
    (run,) = ledger_runs()
    attempts = ledger_attempts(run.run_id)
    assert (attempts[0].zone, attempts[0].spot) == ("zone-a", True)  # the best ranked zone first
    assert (attempts[-1].zone, attempts[-1].spot, attempts[-1].end_reason) == ("zone-b", True, "completed")
    assert all(x.zone == "zone-a" for x in attempts[:-1])  # no on-demand: the move kept it on spot
    from launcher.ledger import Ledger

    with Ledger() as led:
        placed = [e.data for e in led.events(run.run_id, kind="placement")]
    moves = [p for p in placed if p["decision"] == "spot" and p.get("zone_index") == 1]
    assert moves and moves[0]["offer"]["zone"] == "zone-b" and "move to zone 1" in moves[0]["reason"]
    starts = [int(x.split()[-1]) for x in r.stdout.splitlines() if "resumes at" in x]
    assert len(starts) >= 2 and starts == sorted(starts)
    shown = run_cli("runs", "show", run.run_id)
    assert shown.returncode == 0 and "local/local/zone-b local-cpu spot" in shown.stdout
    listed = run_cli("runs", "list")
    assert listed.returncode == 0 and "local/local/zone-b local-cpu spot" in listed.stdout


def test_fewer_simulated_preemptions_than_asked_are_explained(tmp_path):
    # The job counts to 10 (about 0.5 s); preemptions due within 60 s of each start cannot land.
    spec = write_spec(tmp_path, counter_spec(10, "launcher: {expected_hours: 0.01}"))
    r = run_cli("launch", str(spec), "--yes", "--simulate-preemptions", "3", "--simulate-within", "60",
                "--grace-seconds", "5")
    assert r.returncode == 0, r.stderr
    assert "simulated preemptions: 0 of 3 happened; the job finished before the next one was due" in r.stderr


def test_all_asked_preemptions_say_nothing_more(tmp_path):
    spec = write_spec(tmp_path, counter_spec(30, "launcher: {expected_hours: 0.01}"))
    r = run_cli("launch", str(spec), "--yes", "--simulate-preemptions", "0.5,0.5", "--grace-seconds", "5")
    assert r.returncode == 0, r.stderr
    assert "simulated preemptions:" not in r.stderr


def test_a_deadline_with_only_on_demand_offers_starts_at_once(tmp_path):
    # No spot offer in the plan: the placement policy has nothing to wait for, so the job runs now
    # (it once waited for spot capacity that could never exist until the deadline's slack ran out).
    spec = write_spec(tmp_path, counter_spec(5, "launcher: {deadline: 6h, expected_hours: 0.01}\n        resources: {infra: local}"))
    r = run_cli("launch", str(spec), "--yes", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "done at 5"
    (run,) = ledger_runs()
    assert [(a.spot, a.end_reason) for a in ledger_attempts(run.run_id)] == [(False, "completed")]
