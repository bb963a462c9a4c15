"""A detached controller that dies in its first second does not block `launch --resume`: the
pid and start time recorded at spawn tell a dead controller from a starting one (real CLI)."""

from __future__ import annotations

import os
import re
import signal

from launcher.ledger import Ledger
from tests.conftest import run_cli

SPEC = """name: quickdeath
resources: {cpus: 1+}
run: sleep 30
launcher: {project: p, owner: ana, experiment: e, expected_hours: 0.01, budget_usd: 1}
"""


def test_controller_killed_at_once_can_be_resumed(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    res = run_cli("launch", str(spec), "--detach", "--yes", "--cheapest", timeout=120)
    assert res.returncode == 0, res.stderr
    pid = int(re.search(r"controller pid (\d+)", res.stderr).group(1))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    with Ledger() as led:
        run_id = next(r.run_id for r in led.list_runs() if r.name == "quickdeath")
    try:
        again = run_cli("launch", "--resume", run_id, "--detach", timeout=120)
        assert again.returncode == 0, again.stderr
        assert "live controller" not in again.stderr
    finally:
        run_cli("down", run_id, "--wait", "20", timeout=60)
