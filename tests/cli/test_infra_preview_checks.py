"""`launcher infra preview --dry-run` refuses flags that contradict each other or the catalog
(exit 2, one message, nothing planned)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

BASE = ["infra", "preview", "--dry-run", "--cloud", "aws", "--project", "p", "--owner", "o", "--cost-center", "c",
        "--experiment", "e", "--cluster", "c1", "--ssh-cidr", "203.0.113.7/32"]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--region", "us-east-1", "--instance-type", "g5.xlarge", "--gpus", "H100:8"], "g5.xlarge has A10G:1, not H100:8"),
        (["--region", "us-east-1", "--instance-type", "g5.xlarge", "--gpus", "A10G:4"], "g5.xlarge has A10G:1, not A10G:4"),
        (["--region", "us-east-1", "--zone", "eu-west-1a", "--instance-type", "g5.xlarge"], "--zone eu-west-1a is not in --region us-east-1"),
    ],
)
def test_contradictions_exit_2(flags: list[str], needle: str) -> None:
    r = run_cli(*BASE, *flags)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr
    assert r.stdout == ""


def test_consistent_flags_plan() -> None:
    r = run_cli(*BASE, "--region", "us-east-1", "--zone", "us-east-1a", "--instance-type", "g5.xlarge", "--gpus", "A10G:1")
    assert r.returncode == 0, r.stderr
    assert "g5.xlarge" in r.stdout
