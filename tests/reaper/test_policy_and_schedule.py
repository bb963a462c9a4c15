"""Reaper policy validation (before anything is touched) and the cron schedule round trip."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from launcher.errors import BadInputError, SpecError
from launcher.reaper import schedule
from launcher.reaper.policy import load_policy
from tests.conftest import run_cli


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "reap.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("defaults: {action: destory}", "did you mean 'destroy'"),
        ("defaults: {grace_minuts: 3}", "did you mean 'grace_minutes'"),
        ("defaults: {idle: {gpu_util_below_pct: 300}}", "less than or equal to 100"),
        ("providers: [awz]", "did you mean 'aws'"),
        ("defaults: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
    ],
)
def test_bad_policy_is_rejected_with_a_clear_message(tmp_path, text, needle):
    with pytest.raises(SpecError) as e:
        load_policy(write(tmp_path, text))
    assert needle in str(e.value)


def test_project_override_merges_over_defaults(tmp_path):
    pol = load_policy(write(tmp_path, "defaults: {grace_minutes: 90}\nprojects: {research: {action: stop}}"))
    r = pol.for_project("research")
    assert (r.action, r.grace_minutes) == ("stop", 90)
    assert pol.for_project("other").action == "destroy"


def test_missing_policy_file(tmp_path):
    with pytest.raises(BadInputError):
        load_policy(tmp_path / "nope.yaml")


def test_cli_bad_policy_exits_2_and_writes_nothing(tmp_path, launcher_home):
    p = write(tmp_path, "defaults: {action: nuke}")
    res = run_cli("reap", "--policy", str(p), env={"LAUNCHER_HOME": str(launcher_home)})
    assert res.returncode == 2, res.stderr
    assert "unknown action 'nuke'" in res.stderr
    assert "Traceback" not in res.stderr
    assert list(launcher_home.iterdir()) == []


def test_cli_policy_naming_provider_without_credentials_exits_2(tmp_path, launcher_home):
    p = write(tmp_path, "providers: [aws]")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"LAUNCHER_HOME": str(launcher_home), "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")})
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "launcher.cli.main", "reap", "--policy", str(p)], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "no credentials" in res.stderr


@pytest.fixture
def fake_crontab(tmp_path, monkeypatch) -> Path:
    """A `crontab` on PATH that keeps the table in a file (same -l / - protocol as cron's)."""
    table = tmp_path / "table"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "crontab"
    script.write_text(f"""#!/bin/sh
if [ "$1" = "-l" ]; then [ -f {table} ] && cat {table} && exit 0; echo "no crontab for root" >&2; exit 1; fi
if [ "$1" = "-" ]; then cat > {table}; exit 0; fi
exit 2
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    table.write_text("0 1 * * * /usr/bin/backup # someone else's job\n")
    return table


def test_schedule_install_is_idempotent_and_remove_keeps_other_lines(fake_crontab):
    s = schedule.Schedule(minute=5, hour=2, policy_path="/etc/reap.yaml")
    schedule.install(s)
    schedule.install(s)
    text = fake_crontab.read_text()
    assert text.count(schedule.MARKER) == 1
    assert "5 2 * * * " in text and "reap --json --policy /etc/reap.yaml" in text
    assert "/usr/bin/backup" in text
    assert schedule.installed_line() is not None
    assert schedule.remove() is True
    assert schedule.MARKER not in fake_crontab.read_text()
    assert "/usr/bin/backup" in fake_crontab.read_text()
    assert schedule.remove() is False


def test_schedule_rejects_bad_time(tmp_path):
    res = run_cli("reap", "schedule", "install", "--at", "25:00")
    assert res.returncode == 2
    assert "invalid schedule time" in res.stderr


def test_printed_units_carry_the_same_time():
    s = schedule.Schedule(minute=7, hour=4)
    assert "OnCalendar=*-*-* 04:07:00" in s.systemd_units()
    assert 'schedule: "7 4 * * *"' in s.kubernetes_cronjob()
    assert "concurrencyPolicy: Forbid" in s.kubernetes_cronjob()
