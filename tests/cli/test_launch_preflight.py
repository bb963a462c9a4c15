"""A real cloud launch checks what it will need before anything is written: a cloud with
credentials but no Pulumi CLI / no --ssh-cidr / no SSH key leaves the plan with the reason, and
when nothing usable is left `launch` refuses at once (exit 5 for a missing tool, 2 for settings)
instead of starting a run that can only wait."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli

SPEC = """name: t
resources:
  accelerators: A10G:1
  any_of:
{alts}
run: echo ran-here
launcher:
  project: p
  owner: o
  cost_center: c
  expected_hours: 1
"""


def _spec(tmp_path: Path, *infras: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(SPEC.format(alts="\n".join(f"    - infra: {i}" for i in infras)))
    return p


@pytest.fixture
def aws_env(tmp_path: Path) -> dict:
    """AWS credentials, a HOME without SSH keys, a PATH without pulumi (a bin dir tests may add to)."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = os.pathsep.join([str(bin_dir), os.path.dirname(os.sys.executable), "/usr/bin", "/bin"])
    return {"HOME": str(home), "PATH": path, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x",
            "GOOGLE_APPLICATION_CREDENTIALS": "", "LAUNCHER_SSH_CIDR": ""}  # fmt: skip


def test_no_pulumi_cli_refuses_with_exit_5_before_writing(tmp_path: Path, aws_env: dict, launcher_home: Path) -> None:
    r = run_cli("launch", str(_spec(tmp_path, "aws")), "--yes", env=aws_env, timeout=120)
    assert r.returncode == 5, r.stdout + r.stderr
    assert "no usable offer: aws needs the Pulumi CLI" in r.stderr
    assert "--ssh-cidr" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (launcher_home / "ledger.db").exists() and not (launcher_home / "runs").exists()


def test_missing_ssh_settings_refuse_with_exit_2(tmp_path: Path, aws_env: dict, launcher_home: Path) -> None:
    fake = Path(aws_env["PATH"].split(os.pathsep)[0]) / "pulumi"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    r = run_cli("launch", str(_spec(tmp_path, "aws")), "--yes", "--cloud", "aws", env=aws_env, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--ssh-cidr" in r.stderr and "SSH public key" in r.stderr and "Pulumi" not in r.stderr
    assert not (launcher_home / "runs").exists()


def test_unusable_cloud_leaves_the_plan_with_the_reason_and_the_rest_runs(tmp_path: Path, aws_env: dict) -> None:
    r = run_cli("launch", str(_spec(tmp_path, "aws", "local")), "--yes", env=aws_env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "aws: offers skipped: needs the Pulumi CLI" in r.stderr
    assert "chosen:   local" in r.stderr
    assert "ran-here" in r.stdout


def test_dry_run_still_shows_the_cloud_plan(tmp_path: Path, aws_env: dict) -> None:
    r = run_cli("launch", str(_spec(tmp_path, "aws")), "--dry-run", env=aws_env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "chosen:   aws/" in r.stderr
    assert "offers skipped" not in r.stderr


def test_dry_run_needs_no_credentials_whichever_way_the_cloud_is_named(tmp_path: Path, aws_env: dict) -> None:
    env = {**aws_env, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    spec = tmp_path / "named.yaml"
    spec.write_text("name: t\nresources:\n  infra: aws\n  accelerators: A10G:1\nrun: echo hi\n"
                    "launcher: {project: p, owner: o, cost_center: c}\n")  # fmt: skip
    by_spec = run_cli("launch", str(spec), "--dry-run", env=env, timeout=120)
    by_flag = run_cli("launch", str(_spec(tmp_path, "aws")), "--cloud", "aws", "--dry-run", env=env, timeout=120)
    for r in (by_spec, by_flag):
        assert r.returncode == 0, r.stderr
        assert "chosen:   aws/" in r.stderr and "[no credentials]" in r.stderr
    # a real launch still refuses (exit 4) and says where it looked
    r = run_cli("launch", str(spec), "--yes", env=env, timeout=120)
    assert r.returncode == 4, r.stderr
