"""The core install never imports mlflow: a whole launch (tracking off) and every tracking module
but the MLflow sink, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.launch_helpers import clean_env, write_spec  # noqa: F401


def test_launch_and_tracking_modules_do_not_import_mlflow(tmp_path, clean_env, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    spec = write_spec(tmp_path, """
        name: plain
        run: |
          echo '{"step": 1, "loss": 0.5}'
        launcher: {project: p, expected_hours: 0.01}
        """)  # fmt: skip
    code = f"""
import sys
from launcher.cli.main import run
import launcher.tracking, launcher.tracking.session, launcher.tracking.metrics, launcher.tracking.reproduce
import launcher.tracking.run_diff, launcher.tracking.lineage, launcher.tracking.artifacts, launcher.cli.reproduce_cmd
rc = run(["launch", {str(spec)!r}, "--yes", "--cheapest"])
assert rc == 0, rc
rc = run(["runs", "list", "--json"])
loaded = sorted(m for m in sys.modules if m == "mlflow" or m.startswith("mlflow."))
print("MLFLOW_MODULES", loaded)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "MLFLOW_MODULES []" in r.stdout
