"""pyflakes' checks (ruff, rule set F, configured in pyproject.toml) hold over the whole tree,
benches and scripts included (no test imports most benches), and the check really fails on a slip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).parent / "ruff"


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_the_tree_has_no_unused_import_or_undefined_name():
    res = _ruff(".", cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_check_fails_on_an_unused_import_and_an_undefined_name(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "slip.py").write_text("import os\n\n\ndef f():\n    return undefined_thing\n")
    res = _ruff(".", cwd=tmp_path)
    assert res.returncode == 1
    assert "bench/slip.py:1:8: F401" in res.stdout
    assert "F821" in res.stdout and "undefined_thing" in res.stdout
