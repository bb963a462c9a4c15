"""`launch --resume` after the controller was killed (kill -9) continues the same MLflow run: the
id comes from the ledger, the steps the job replays after resuming from its checkpoint are not
logged twice, whether the run directory still has the tracking state or MLflow is asked what it
holds. The resumed controller finds the tracker from the ledger (no MLFLOW_TRACKING_URI)."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time

import pytest

from tests.cli.launch_helpers import clean_env, ledger_runs, popen_cli, write_spec  # noqa: F401
from tests.conftest import run_cli
from tests.tracking.conftest import curve, runs_of

pytestmark = [pytest.mark.usefixtures("clean_env")]

# Attempt 1 logs steps 1-10 and hangs; a later attempt "resumes from a checkpoint at step 6"
# and logs 6-20 (6-10 replayed with the same values).
JOB = textwrap.dedent("""
    import json, os, time
    first = os.environ["LAUNCHER_ATTEMPT"] == "1"
    for s in range(1, 11) if first else range(6, 21):
        print(json.dumps({"step": s, "loss": 1.0 / s}), flush=True)
    if first:
        time.sleep(300)
    print("final_weights_sha256=" + "12" * 32, flush=True)
""")


@pytest.mark.parametrize("keep_state", [True, False], ids=["state-file", "ask-mlflow"])
def test_resume_after_kill_9_continues_the_same_mlflow_run(keep_state, tmp_path, launcher_home, monkeypatch):
    pytest.importorskip("mlflow")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    spec = write_spec(tmp_path, f"""
        name: resumed
        run: exec {sys.executable} {job}
        launcher: {{project: p, experiment: resumed, expected_hours: 0.01}}
        """)  # fmt: skip
    proc = popen_cli("launch", str(spec), "--yes", "--cheapest", "--grace-seconds", "2")
    deadline = time.monotonic() + 180
    state = None
    while time.monotonic() < deadline:
        states = list(launcher_home.glob("runs/*/tracking.json"))
        state = json.loads(states[0].read_text()) if states else None
        if state and state["logged_max"].get("loss") == 10:
            break
        time.sleep(0.2)
    assert state and state["logged_max"] == {"loss": 10}, f"steps 1-10 never reached MLflow: {state}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    (run,) = ledger_runs()
    if not keep_state:
        (launcher_home / "runs" / run.run_id / "tracking.json").unlink()
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    # a generous final flush: on a loaded machine importing mlflow alone can take many seconds
    r = run_cli("launch", "--resume", run.run_id, timeout=300, env={"LAUNCHER_TRACKING_FLUSH_S": "120"})
    assert r.returncode == 0, r.stderr[-3000:]
    (mlrun,) = runs_of(uri, "resumed")
    assert mlrun.info.status == "FINISHED", r.stderr[-2000:]
    assert curve(uri, mlrun.info.run_id, "loss") == [(s, 1.0 / s) for s in range(1, 21)]
    assert mlrun.info.status == "FINISHED" and mlrun.data.metrics["attempts"] == 2
    from launcher.ledger import Ledger

    with Ledger() as led:
        ids = [e.data["mlflow_run_id"] for e in led.events(run.run_id, kind="tracking")]
        attempts = led.attempts(run.run_id)
    assert ids == [mlrun.info.run_id]
    assert [a.end_reason for a in attempts] == ["abandoned", "completed"]
