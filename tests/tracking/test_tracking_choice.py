"""Which tracker a run uses: the spec's `launcher.tracking` and MLFLOW_TRACKING_URI; a misspelled
value is bad input (exit 2) before anything is written."""

from __future__ import annotations

import pytest

from launcher.spec.loader import load_spec_text
from launcher.tracking import tracking_uri_for
from tests.cli.launch_helpers import clean_env, write_spec  # noqa: F401
from tests.conftest import run_cli


def _spec(tracking: str | None):
    block = f", tracking: {tracking}" if tracking else ""
    return load_spec_text(f"name: t\nrun: echo hi\nlauncher: {{project: p{block}}}\n").spec


@pytest.mark.parametrize(
    ("tracking", "env", "want"),
    [
        (None, {}, None),
        (None, {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}, "http://127.0.0.1:5000"),
        ("off", {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}, None),
        ("mlflow", {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}, "http://127.0.0.1:5000"),
        ("mlflow", {}, "sqlite:///{home}/mlflow.db"),
    ],
)
def test_tracker_choice(tracking, env, want, launcher_home):
    expected = want.format(home=launcher_home.resolve()) if want else None
    assert tracking_uri_for(_spec(tracking), env) == expected


def test_misspelled_tracking_is_bad_input_and_writes_nothing(tmp_path, clean_env, launcher_home):
    spec = write_spec(tmp_path, "name: t\nrun: echo hi\nlauncher: {tracking: mlfow}\n")
    r = run_cli("launch", str(spec), "--yes", "--cheapest")
    assert r.returncode == 2
    assert "launcher.tracking: Input should be 'mlflow' or 'off'" in r.stderr
    assert not (launcher_home / "ledger.db").exists()
