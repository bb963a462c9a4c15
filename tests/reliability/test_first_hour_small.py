"""Small first-hour surprises, through the real CLI: a local rank cap before anything is
written, `logs --rank` naming the ranks that exist, `--resume` on an empty home creating nothing,
the schedule carrying LAUNCHER_HOME, and `reap --help` describing what `--json` prints."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_local_rank_cap_refuses_before_anything_is_written(tmp_path, launcher_home):
    spec = tmp_path / "many.yaml"
    spec.write_text("name: many\nnum_nodes: 100000\nresources: {infra: local}\nrun: echo hi\n")
    res = run_cli("launch", str(spec), "--yes", timeout=60)
    assert res.returncode == 2, res.stderr
    assert "100000 ranks asked; this machine runs at most" in res.stderr, res.stderr
    assert "LAUNCHER_LOCAL_MAX_NODES" in res.stderr
    assert not (launcher_home / "ledger.db").exists() and not (launcher_home / "runs").exists()
    spec2 = tmp_path / "two.yaml"
    spec2.write_text("name: two\nnum_nodes: 2\nresources: {infra: local}\nrun: echo hi\n")
    res2 = run_cli("launch", str(spec2), "--yes", timeout=60, env={"LAUNCHER_LOCAL_MAX_NODES": "1"})
    assert res2.returncode == 2 and "2 ranks asked; this machine runs at most 1" in res2.stderr, res2.stderr


def test_logs_rank_that_does_not_exist_names_the_ranks(tmp_path):
    spec = tmp_path / "one.yaml"
    spec.write_text("name: one\nresources: {infra: local}\nrun: echo hello-from-rank0\n")
    res = run_cli("launch", str(spec), "--yes", timeout=120)
    assert res.returncode == 0, res.stderr
    ok = run_cli("logs", "one", "--rank", "0", timeout=60)
    assert ok.returncode == 0 and "hello-from-rank0" in ok.stdout, ok.stderr
    bad = run_cli("logs", "one", "--rank", "5", timeout=60)
    assert bad.returncode == 2, (bad.returncode, bad.stdout, bad.stderr)
    assert "has no rank 5; its ranks are 0" in bad.stderr


def test_resume_on_an_empty_home_creates_nothing(launcher_home):
    res = run_cli("launch", "--resume", "r-nothing", timeout=60)
    assert res.returncode == 7, res.stderr
    assert list(launcher_home.iterdir()) == []


def test_schedule_show_carries_launcher_home(launcher_home):
    res = run_cli("reap", "schedule", "show", timeout=60)
    assert res.returncode == 0, res.stderr
    cron = res.stdout.split("cron:\n", 1)[1].splitlines()[0]
    assert f"LAUNCHER_HOME={launcher_home.resolve()}" in cron, cron
    assert f"Environment=LAUNCHER_HOME={launcher_home.resolve()}" in res.stdout


def test_reap_json_help_matches_output():
    help_text = run_cli("reap", "--help", timeout=60).stdout
    assert "one JSON list" in " ".join(help_text.split())
    res = run_cli("reap", "--dry-run", "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    assert isinstance(json.loads(res.stdout), list)
