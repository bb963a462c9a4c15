"""A real `mlflow server` (SQLite backend store, artifacts in a folder) on a free loopback port,
started and stopped by the tests; it can be stopped and started again on the same port and store
to play a tracker outage."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import _listening_inodes, _owned_by, _venv_bin, free_port

STARTUP_TIMEOUT_S = 300  # a first start creates the SQLite schema; slow on a loaded 2-core box


class MlflowServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen(
            [_venv_bin("mlflow"), "server", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
             "--artifacts-destination", str(self.root / "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(self.root),
            # No job runner (a pool of huey consumers the tests do not use).
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200 and _owned_by(self.proc.pid, _listening_inodes(self.port)):
                        return  # our server answers, not another process on the port
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"mlflow server did not answer /health within {STARTUP_TIMEOUT_S}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def log_tail(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    pytest.importorskip("mlflow")
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop()


def mlflow_client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_of(uri: str, experiment: str) -> list:
    client = mlflow_client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id])


def curve(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of every point logged, in step order (duplicates would show twice)."""
    return sorted((m.step, m.value) for m in mlflow_client(uri).get_metric_history(run_id, key))
