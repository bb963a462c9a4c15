"""Shared helpers for the launch/runs CLI tests: a clean environment (no cloud credentials,
HOME in tmp), spec writing, and polling the ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

CRED_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ENDPOINT_URL", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_ID", "LAMBDA_API_KEY", "RUNPOD_API_KEY", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CLOUDSDK_CONFIG",
)  # fmt: skip


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    """No cloud credentials: only the local backend is enabled."""
    for v in CRED_VARS:
        monkeypatch.delenv(v, raising=False)
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    return home


def write_spec(dir_: Path, text: str, name: str = "task.yaml") -> Path:
    p = dir_ / name
    p.write_text(textwrap.dedent(text))
    return p


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def state_files(home: Path) -> list[str]:
    """Files that are run state (ledger, run directories), ignoring the catalog cache that
    pricing keeps under LAUNCHER_HOME/catalogs."""
    return [f for f in files_under(home) if not f.startswith("catalogs")]


def popen_cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "launcher.cli.main", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO), env={**os.environ}, **kw,
    )  # fmt: skip


def runs_json(*args: str) -> list[dict]:
    """`launcher runs list --json` through the real CLI (a subprocess)."""
    r = run_cli("runs", "list", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["runs"]


def ledger_runs() -> list:
    """The ledger's runs read in-process (cheaper than a CLI call where the CLI is not under test)."""
    from launcher.ledger import Ledger

    with Ledger() as led:
        return led.list_runs(limit=None)


def ledger_attempts(run_id: str) -> list:
    from launcher.ledger import Ledger

    with Ledger() as led:
        return led.attempts(run_id)


def cli_inproc(capsys, *args: str) -> tuple[int, str, str]:
    """The real console entry point in a forked child (tests/cli_child.py): (exit code, out, err)."""
    from tests.cli_child import run

    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def wait_for(pred, timeout_s: float = 30.0, interval_s: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out waiting for {what}")


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
