"""The one module that imports mlflow (the optional `[mlflow]` extra), and only when called.

Every call may raise (tracker down, bad answer); the session buffers and retries. MLflow's own
HTTP retries (minutes of backoff by default) are turned down so a call to a dead tracker fails
fast and the session decides when to try again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.errors import ToolMissingError
from launcher.tracking.metrics import MetricPoint

# MLflow's limits per log_batch call.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_PARAM_CHARS = 6000
NOTE_TAG = "mlflow.note.content"


def mlflow_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("mlflow") is not None


class MlflowSink:
    def __init__(self, tracking_uri: str, *, request_timeout_s: float = 5.0) -> None:
        # Read by mlflow per request; the user's own settings win.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"  # stdout is the job's output
        if tracking_uri.startswith("file:") or "://" not in tracking_uri:
            # A file store named by the user is what they want, though MLflow 3 calls it legacy.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(max(1, request_timeout_s))))
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ToolMissingError(
                "experiment tracking asks for MLflow, which is not installed",
                hint="pip install 'gpu-launcher[mlflow]'",
            ) from None
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)

    def experiment_id(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:  # created meanwhile by another controller
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def create_run(self, experiment: str, run_name: str, tags: Mapping[str, str]) -> str:
        run = self.client.create_run(self.experiment_id(experiment), run_name=run_name, tags=dict(tags))
        return run.info.run_id

    def log_metrics(self, run_id: str, points: Sequence[MetricPoint]) -> None:
        from mlflow.entities import Metric

        for i in range(0, len(points), MAX_METRICS_PER_BATCH):
            chunk = points[i : i + MAX_METRICS_PER_BATCH]
            self.client.log_batch(run_id, metrics=[Metric(p.key, p.value, p.timestamp_ms, p.step) for p in chunk])

    def log_params(self, run_id: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:MAX_PARAM_CHARS]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i : i + MAX_PARAMS_PER_BATCH])

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for i in range(0, len(items), MAX_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=items[i : i + MAX_TAGS_PER_BATCH])

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def terminate(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status)

    def logged_max_steps(self, run_id: str) -> dict[str, int]:
        """Highest step logged per metric (to continue a run whose local state was lost)."""
        run = self.client.get_run(run_id)
        out = {}
        for key in run.data.metrics:
            history = self.client.get_metric_history(run_id, key)
            if history:
                out[key] = max(m.step for m in history)
        return out
