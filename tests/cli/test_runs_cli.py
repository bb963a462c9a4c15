"""`launcher status`, `runs list|show`, `logs`, `down` through the real CLI, with detached runs."""

from __future__ import annotations

import json

import pytest

from tests.cli.launch_helpers import clean_env, files_under, ledger_runs, pid_gone, runs_json, wait_for, write_spec  # noqa: F401
from tests.conftest import run_cli

pytestmark = pytest.mark.usefixtures("clean_env")


def test_read_commands_on_a_fresh_home_create_nothing(launcher_home):
    r = run_cli("status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"runs": []}
    assert run_cli("runs", "list", "--json").stdout.strip() == '{\n  "runs": []\n}'
    r = run_cli("logs", "r-nope")
    assert r.returncode == 7 and "no runs yet" in r.stderr
    assert files_under(launcher_home) == []


def test_detach_then_logs_follow_then_show(tmp_path):
    spec = write_spec(
        tmp_path,
        """
        name: detached
        num_nodes: 2
        run: |
          for i in 1 2 3; do echo "line $i"; sleep 0.2; done
        launcher: {project: proj-a, owner: alice}
        """,
    )
    r = run_cli("launch", str(spec), "--yes", "--detach")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip()
    assert run_id.startswith("r-") and "started in the background" in r.stderr
    f = run_cli("logs", run_id, "--follow", timeout=60)  # returns once the run ended
    assert f.returncode == 0, f.stderr
    for rank in (0, 1):
        assert [ln for ln in f.stdout.splitlines() if ln.startswith(f"(rank {rank})")] == [
            f"(rank {rank}) line {i}" for i in (1, 2, 3)
        ]
    one = run_cli("logs", run_id, "--rank", "1")
    assert one.stdout.splitlines() == ["line 1", "line 2", "line 3"]
    show = json.loads(run_cli("runs", "show", run_id[:14], "--json").stdout)
    assert show["state"] == "succeeded" and show["owner"] == "alice" and show["project"] == "proj-a"
    assert show["tags"]["project"] == "proj-a" and show["tags"]["run-id"] == run_id
    assert show["spec_hash"] and show["host"]
    from launcher import __version__

    assert show["launcher_version"] == __version__
    (a,) = show["attempt_rows"]
    assert (a["cloud"], a["num_nodes"], a["end_reason"], a["price_usd_per_hour"]) == ("local", 2, "completed", 0.0)
    controller = [e for e in show["events"] if e["kind"] == "controller"]
    assert controller[0]["data"]["mode"] == "detached"
    text = run_cli("runs", "show", run_id)
    assert text.returncode == 0 and "attempts" in text.stdout and "completed" in text.stdout
    assert f"  launcher_version: {__version__}\n" in text.stdout, text.stdout


def test_down_stops_a_running_detached_job(tmp_path):
    spec = write_spec(
        tmp_path,
        """
        name: sleeper
        run: |
          echo "pid $$"
          trap 'echo got-term; exit 143' TERM
          while true; do sleep 0.1; done
        """,
    )
    run_id = run_cli("launch", str(spec), "--yes", "--detach", "--grace-seconds", "3").stdout.strip()
    logf = lambda: run_cli("logs", run_id).stdout  # noqa: E731
    first = wait_for(lambda: logf().strip(), 30, 0.2, "job output")
    job_pid = int(first.split()[-1])
    st = json.loads(run_cli("status", "--json").stdout)["runs"]
    assert [(s["run_id"], s["state"], s["controller"]) for s in st] == [(run_id, "running", "alive")]
    d = run_cli("down", run_id)
    assert d.returncode == 0, d.stderr
    assert "controller stopped it" in d.stderr
    assert pid_gone(job_pid)
    assert "got-term" in logf()  # SIGTERM first: the job had its chance to clean up
    (run,) = runs_json()
    assert run["state"] == "cancelled" and run["current"]["end_reason"] == "cancelled"
    assert json.loads(run_cli("status", "--json").stdout)["runs"] == []
    listed = run_cli("runs", "list").stdout + run_cli("runs", "show", run_id).stdout
    assert "cancelled" in listed and "cancelled (cancelled)" not in listed  # the reason only when it adds something
    again = run_cli("down", run_id)  # idempotent
    assert again.returncode == 0 and "already ended" in again.stderr


def test_down_by_cluster_name_and_unknown_target(tmp_path):
    spec = write_spec(tmp_path, "run: echo ok\n")
    assert run_cli("launch", str(spec), "--yes").returncode == 0
    run_id = ledger_runs()[0].run_id
    cluster = f"{run_id}-c1"
    r = run_cli("down", cluster)
    assert r.returncode == 0 and f"cluster {cluster} already terminated" in r.stderr
    bad = run_cli("down", "no-such-thing")
    assert bad.returncode == 7 and "no run or cluster named 'no-such-thing'" in bad.stderr


def test_status_lists_live_runs_only_unless_all(tmp_path):
    spec = write_spec(tmp_path, "name: quick\nrun: echo ok\n")
    assert run_cli("launch", str(spec), "--yes").returncode == 0
    assert json.loads(run_cli("status", "--json").stdout)["runs"] == []
    (r,) = json.loads(run_cli("status", "--all", "--json").stdout)["runs"]
    assert r["name"] == "quick" and r["state"] == "succeeded" and r["controller"] is None
    table = run_cli("status", "--all")
    assert "quick" in table.stdout and "succeeded" in table.stdout


def test_failed_run_says_failed_once(tmp_path):
    spec = write_spec(tmp_path, "run: exit 3\n")
    res = run_cli("launch", str(spec), "--yes")
    assert res.returncode == 1
    assert "failed" in res.stderr and "failed (failed)" not in res.stderr, res.stderr
    (run,) = ledger_runs()
    out = run_cli("runs", "list").stdout + run_cli("runs", "show", run.run_id).stdout
    assert "failed" in out and "failed (failed)" not in out, out
