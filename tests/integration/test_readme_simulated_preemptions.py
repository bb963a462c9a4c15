"""The docs' `--simulate-preemptions 3` example (README and docs/guides), exactly as written (no --simulate-within), gives
three preemptions on the example spec and then a completed run."""

from __future__ import annotations

import shlex

import pytest

from tests.cli.launch_helpers import clean_env, ledger_attempts, ledger_runs  # noqa: F401
from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

DOC_TEXT = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
README_LINE = next(
    ln.strip() for ln in DOC_TEXT.splitlines()
    if ln.strip().startswith("launch task_specs/train.yaml") and "--simulate-preemptions 3" in ln
)  # fmt: skip


def test_readme_example_gets_the_preemptions_it_asks_for():
    assert "--simulate-within" not in README_LINE
    r = run_cli(*shlex.split(README_LINE), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "simulated preemptions:" not in r.stderr  # no shortfall to explain
    (run,) = ledger_runs()
    reasons = [a.end_reason for a in ledger_attempts(run.run_id)]
    assert reasons == ["preempted", "preempted", "preempted", "completed"]
