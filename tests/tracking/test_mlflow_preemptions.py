"""Three simulated preemptions of `task_specs/train.py` through the real `launch` CLI yield exactly
one MLflow run whose loss curve equals, step for step, the curve of an uninterrupted run of the same
seed; against a real `mlflow server` (SQLite store) and against a local file store. The run also
carries the spec's params, the who/what and provenance tags, the end metrics and the artifacts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cli.launch_helpers import clean_env, ledger_runs, write_spec  # noqa: F401
from tests.conftest import REPO, run_cli
from tests.tracking.conftest import curve, mlflow_client, runs_of

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

TRAIN = REPO / "task_specs" / "train.py"
EPOCHS = 3
TOTAL_STEPS = EPOCHS * (1437 // 40)  # 1,437 training digits, batches of 40
ARGS = ["--epochs", str(EPOCHS), "--batch-size", "40", "--seed", "0", "--log-every-steps", "1",
        "--checkpoint-every-steps", "10", "--step-time-s", "0.09"]  # fmt: skip
PREEMPTIONS = ["--simulate-preemptions", "3", "--simulate-seed", "1", "--simulate-within", "4"]


@pytest.fixture(scope="module")
def reference():
    """loss per step and the final weights of an uninterrupted run, read from its own output."""
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_CHECKPOINT_DIR"}
    r = subprocess.run([sys.executable, str(TRAIN), *ARGS],
                       capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    loss = sorted((e["step"], e["loss"]) for e in map(json.loads, (x for x in lines if x.startswith("{"))) if e["event"] == "step")
    return loss, lines[-1].split("=", 1)[1]


@pytest.mark.parametrize("store", ["server", "file"])
def test_three_preemptions_one_mlflow_run_with_the_uninterrupted_curve(store, request, tmp_path, reference, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind a flag
    uri = request.getfixturevalue("mlflow_server").url if store == "server" else (tmp_path / "mlruns").as_uri()
    experiment = f"proof-{store}"
    args = " ".join(ARGS)
    spec = write_spec(
        tmp_path,
        f"""
        name: proof
        run: exec {sys.executable} {TRAIN} {args}
        resources: {{cpus: 1+}}
        launcher: {{project: tracking-proof, experiment: {experiment}, owner: ada, cost_center: cc-7,
                    expected_hours: 0.01, seeds: {{train: 0}}}}
        """,
    )
    r = run_cli("launch", str(spec), "--yes", "--cheapest", *PREEMPTIONS, "--grace-seconds", "60",
                env={"MLFLOW_TRACKING_URI": uri, "LAUNCHER_TRACKING_FLUSH_S": "120"}, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    ref_loss, ref_weights = reference
    assert len(ref_loss) == TOTAL_STEPS
    # launch's stdout stays the job's output: MLflow prints nothing there.
    assert not any("View run" in line for line in r.stdout.splitlines())

    (run,) = ledger_runs()
    from launcher.ledger import Ledger

    with Ledger() as led:
        attempts = led.attempts(run.run_id)
        tracking = [e.data for e in led.events(run.run_id, kind="tracking")]
        results = [e.data for e in led.events(run.run_id, kind="results")]
    assert [a.end_reason for a in attempts] == ["preempted"] * 3 + ["completed"]

    (mlrun,) = runs_of(uri, experiment)  # exactly one MLflow run for four attempts
    assert tracking == [{"mlflow_run_id": mlrun.info.run_id, "tracking_uri": uri}]
    assert results == [{"final_weights_sha256": ref_weights, "mlflow_run_id": mlrun.info.run_id}]
    assert curve(uri, mlrun.info.run_id, "loss") == ref_loss  # every step once, same values
    assert mlrun.info.status == "FINISHED"

    tags, params, metrics = mlrun.data.tags, mlrun.data.params, mlrun.data.metrics
    assert {k: tags[k] for k in ("project", "experiment", "owner", "cost-center", "run-id")} == {
        "project": "tracking-proof", "experiment": experiment, "owner": "ada", "cost-center": "cc-7", "run-id": run.run_id,
    }  # fmt: skip
    assert tags["provenance.host"] == run.host and tags["provenance.seeds"] == '{"train": 0}'
    assert tags["final_weights_sha256"] == ref_weights
    assert params["launcher.project"] == "tracking-proof" and params["resources.cpus"] == "1+"
    assert params["launcher.seeds.train"] == "0"
    assert metrics["attempts"] == 4 and metrics["preemptions"] == 3
    assert metrics["gpu_hours"] == 0 and metrics["cost_usd"] == 0  # the local backend is free

    client = mlflow_client(uri)
    names = {a.path for a in client.list_artifacts(mlrun.info.run_id)}
    assert {"spec.yaml", "plan.json", "checkpoint", "final_weights_sha256.txt"} <= names
    got = client.download_artifacts(mlrun.info.run_id, "final_weights_sha256.txt", str(tmp_path))
    assert open(got).read().strip() == ref_weights
    manifest = json.loads(open(client.download_artifacts(mlrun.info.run_id, "checkpoint/MANIFEST.json", str(tmp_path))).read())
    assert manifest["step"] == TOTAL_STEPS
