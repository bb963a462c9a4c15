"""A tracker that is down never fails the run and loses nothing once it is back: a real
`mlflow server` is stopped while the job logs and started again on the same port and store; the
MLflow run then holds every step exactly once. A tracker that never answers: the run succeeds
and the ledger's note says what was not logged."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli.launch_helpers import clean_env, ledger_runs, popen_cli, write_spec  # noqa: F401
from tests.conftest import free_port, run_cli
from tests.tracking.conftest import MlflowServer, curve, runs_of

pytestmark = [pytest.mark.usefixtures("clean_env")]

# Prints steps 1..60; waits for a flag file before step 11 and before step 31 (bounded).
JOB = textwrap.dedent("""
    import json, os, sys, time
    def wait_for(path):
        deadline = time.monotonic() + 600
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
    for s in range(1, 61):
        if s == 11: wait_for(sys.argv[1])
        if s == 31: wait_for(sys.argv[2])
        print(json.dumps({"event": "step", "step": s, "loss": 1.0 / s, "acc": s / 100}), flush=True)
    print("final_weights_sha256=" + "cd" * 32, flush=True)
""")


def wait_until(what: str, predicate, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(f"waited {timeout_s}s for {what}")


def log_has_step(home: Path, step: int) -> bool:
    logs = list(home.glob("runs/*/logs/rank-0.log"))
    return bool(logs) and f'"step": {step},' in logs[0].read_text()


@pytest.mark.slow
def test_tracker_down_mid_run_loses_nothing_once_back(tmp_path, launcher_home):
    pytest.importorskip("mlflow")
    server = MlflowServer(tmp_path / "mlflow")
    server.start()
    try:
        job = tmp_path / "job.py"
        job.write_text(JOB)
        flag1, flag2 = tmp_path / "flag1", tmp_path / "flag2"
        spec = write_spec(tmp_path, f"""
            name: outage
            run: exec {sys.executable} {job} {flag1} {flag2}
            launcher: {{project: p, experiment: outage, expected_hours: 0.01}}
            """)  # fmt: skip
        env_extra = {"MLFLOW_TRACKING_URI": server.url, "LAUNCHER_TRACKING_FLUSH_S": "120"}
        import os

        os.environ.update(env_extra)
        try:
            proc = popen_cli("launch", str(spec), "--yes", "--cheapest")
        finally:
            for k in env_extra:
                os.environ.pop(k)

        def first_ten_logged() -> bool:
            runs = runs_of(server.url, "outage")
            return len(runs) == 1 and len(curve(server.url, runs[0].info.run_id, "loss")) == 10

        wait_until("steps 1-10 in MLflow", first_ten_logged)
        (run_before,) = runs_of(server.url, "outage")
        server.stop()  # the tracker goes away while the job goes on
        flag1.touch()
        wait_until("step 30 in the job's log", lambda: log_has_step(launcher_home, 30))
        server.start()  # back, same port and store
        flag2.touch()
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        (mlrun,) = runs_of(server.url, "outage")
        assert mlrun.info.run_id == run_before.info.run_id
        assert curve(server.url, mlrun.info.run_id, "loss") == [(s, 1.0 / s) for s in range(1, 61)]
        assert curve(server.url, mlrun.info.run_id, "acc") == [(s, s / 100) for s in range(1, 61)]
        assert mlrun.info.status == "FINISHED"
        assert "failed attempt(s) to reach the tracker" in mlrun.data.tags["mlflow.note.content"]
        (run,) = ledger_runs()
        from launcher.ledger import Ledger

        with Ledger() as led:
            notes = [e.data for e in led.events(run.run_id, kind="tracking") if "note" in e.data]
        assert notes == []  # everything was logged in the end
    finally:
        server.stop()


def test_unreachable_tracker_never_fails_the_run_and_the_note_says_what_was_not_logged(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(
        "import json\nfor s in range(1, 21):\n    print(json.dumps({'step': s, 'loss': 1.0 / s}))\n"
        "print('final_weights_sha256=' + 'ef' * 32)\n"
    )
    spec = write_spec(tmp_path, f"""
        name: down
        run: {sys.executable} {job}
        launcher: {{project: p, expected_hours: 0.01}}
        """)  # fmt: skip
    uri = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    r = run_cli("launch", str(spec), "--yes", "--cheapest", env={"MLFLOW_TRACKING_URI": uri, "LAUNCHER_TRACKING_FLUSH_S": "3"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-1] == "final_weights_sha256=" + "ef" * 32
    (run,) = ledger_runs()
    from launcher.ledger import Ledger

    with Ledger() as led:
        events = led.events(run.run_id)
    kinds = [e.kind for e in events]
    (note,) = [e.data["note"] for e in events if e.kind == "tracking"]
    assert note.startswith(f"not logged to MLflow at {uri}: the run itself (never created); 20 metric points (loss); end metrics")
    # The run ended before the tracker was waited for, and its results are in the ledger all the same.
    succeeded = max(i for i, e in enumerate(events) if e.kind == "state_change" and e.data["to"] == "succeeded")
    assert succeeded < kinds.index("tracking")
    assert [e.data for e in events if e.kind == "results"] == [{"final_weights_sha256": "ef" * 32, "mlflow_run_id": None}]
