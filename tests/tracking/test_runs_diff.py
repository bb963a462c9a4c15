"""`launcher runs diff A B` through the real CLI: rows that differ are marked and highlighted, the
same facts in JSON (expected values from the two specs written here)."""

from __future__ import annotations

import json
import re

from tests.cli.launch_helpers import clean_env, write_spec  # noqa: F401
from tests.conftest import run_cli


def _launch(tmp_path, name: str, loss: float) -> str:
    spec = write_spec(tmp_path, f"""
        name: {name}
        run: |
          echo '{{"step": 1, "loss": {loss}}}'
          echo final_weights_sha256={"a" * 64}
        launcher: {{project: p, expected_hours: 0.01}}
        """, name=f"{name}.yaml")  # fmt: skip
    r = run_cli("launch", str(spec), "--yes", "--cheapest")
    assert r.returncode == 0, r.stderr
    (run_id,) = re.findall(r"^run (r-\S+)$", r.stderr, re.M)
    return run_id


def test_diff_marks_what_differs(tmp_path, clean_env):
    a = _launch(tmp_path, "first", 0.5)
    b = _launch(tmp_path, "second", 0.25)
    r = run_cli("runs", "diff", a, b, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {(x["section"], x["field"]): x for x in doc["rows"]}
    assert rows[("results", "last loss")] == {"section": "results", "field": "last loss", "a": 0.5, "b": 0.25, "same": False}
    assert rows[("provenance", "spec_hash")]["same"] is False  # the specs differ in name and run
    assert rows[("provenance", "host")]["same"] is True
    assert rows[("results", "final_weights_sha256")] == {
        "section": "results", "field": "final_weights_sha256", "a": "a" * 64, "b": "a" * 64, "same": True,
    }  # fmt: skip
    assert doc["differences"] == sum(1 for x in doc["rows"] if not x["same"]) >= 2

    t = run_cli("runs", "diff", a, b, "--only-differences")
    assert t.returncode == 0, t.stderr
    lines = t.stdout.splitlines()
    loss_line = next(line for line in lines if "last loss" in line)
    assert "≠" in loss_line and "0.5" in loss_line and "0.25" in loss_line
    assert not any("host" in line for line in lines)  # same rows left out
    assert f"{doc['differences']} difference(s)" in t.stderr


def test_diff_unknown_run_is_not_found(tmp_path, clean_env):
    a = _launch(tmp_path, "only", 0.5)
    r = run_cli("runs", "diff", a, "r-nope")
    assert r.returncode == 7, r.stderr
