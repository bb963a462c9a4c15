"""One launcher run's tracking session: the job's output to MLflow, across attempts and controllers.

The controller calls `run_started()` when it takes the run (fresh or resumed) and
`run_ended(state)` when it lets go. In between a background thread follows `logs/rank-0.log`
(both executors write the job's output there, appended across attempts) and sends new metric
points in batches. The controller never waits on the tracker while the job runs; at the end it
waits at most `final_flush_s`.

* One MLflow run per launcher run: its id goes into the ledger (a `tracking` event) the moment it
  is created, and a resumed controller reuses it.
* No gaps, no duplicates: `tracking.json` in the run directory keeps the highest step sent per
  metric (written after each successful batch); a new controller re-reads the log from the top
  and sends only what lies above it. Lost state with a known run: asked from MLflow.
* A tracker that is down costs nothing but memory: points wait in a buffer, sending is retried
  with backoff, and whatever was still not logged at the end is written in the run's note (the
  MLflow note when the tracker answers again, and a `tracking` event in the ledger always).
* Whether or not MLflow is on, the job's `final_weights_sha256` goes into the ledger as a
  `results` event (what `launcher reproduce --check` compares).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from launcher.atomic import atomic_write_text
from launcher.tracking.metrics import MetricFollower, MetricPoint
from launcher.tracking.run_facts import end_metrics, run_params, run_tags_for_tracker

TRACKING_EVENT = "tracking"
RESULTS_EVENT = "results"
STATE_FILE = "tracking.json"
MAX_BUFFERED_POINTS = 1_000_000

# MLflow run status per terminal launcher state.
_STATUS = {"succeeded": "FINISHED", "failed": "FAILED", "cancelled": "KILLED", "budget_stopped": "KILLED"}


@dataclass
class _Backlog:
    """What is waiting to be logged and why it failed last."""

    points: list[MetricPoint] = field(default_factory=list)
    dropped: int = 0
    failures: int = 0
    last_error: str | None = None


class TrackingSession:
    def __init__(
        self,
        job,
        ledger,
        *,
        tracking_uri: str | None,
        sink_factory: Callable[[str], object] | None = None,
        interval_s: float = 1.0,
        max_backoff_s: float = 30.0,
        final_flush_s: float = 15.0,
    ) -> None:
        self.job = job
        self.led = ledger
        self.tracking_uri = tracking_uri
        self.interval_s = interval_s
        self.max_backoff_s = max_backoff_s
        self.final_flush_s = final_flush_s
        self._sink_factory = sink_factory
        self._sink = None
        self._state_path = Path(job.run_dir) / STATE_FILE
        state = self._load_state()
        self.mlflow_run_id: str | None = self._recorded_run_id()
        same_run = state.get("mlflow_run_id") == self.mlflow_run_id
        self._params_logged = bool(state.get("params_logged")) and same_run
        logged_max = state.get("logged_max", {}) if same_run else {}
        self._need_history = self.mlflow_run_id is not None and not same_run
        self.follower = MetricFollower(Path(job.run_dir) / "logs" / "rank-0.log", logged_max)
        self._sent_max: dict[str, int] = dict(logged_max)
        self.backlog = _Backlog()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_try = 0.0
        self._backoff = interval_s

    @property
    def enabled(self) -> bool:
        return self.tracking_uri is not None

    # ---- controller hooks -----------------------------------------------------------------
    def run_started(self) -> None:
        if not self.enabled:
            return
        self._thread = threading.Thread(target=self._loop, name="tracking", daemon=True)
        self._thread.start()

    def run_ended(self, state: str) -> None:
        """Stop following; flush (bounded by `final_flush_s` in all); on a terminal state log the
        end facts, record the results and close the MLflow run. A controller that dies leaves
        the MLflow run open for the one that resumes it."""
        deadline = time.monotonic() + self.final_flush_s
        self._stop.set()
        terminal = state in _STATUS
        if not self.enabled:
            self.follower.read_new(_now_ms(), final=True)
            if terminal:
                self._record_results()
            return
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            # The sender is stuck in a call to the tracker: leave it; say what may be missing.
            if terminal:
                self._record_results(from_log=True)
            self._record_note()
            return
        try:
            self._collect(final=True)
            finished = False
            while True:
                try:
                    self._push()
                    if terminal:
                        self._finish(state)
                    finished = True
                    break
                except Exception as e:  # tracker down or refusing: again until the deadline
                    self._failed(e)
                    if time.monotonic() + self._backoff > deadline:
                        break
                    time.sleep(self._backoff)
            if terminal:
                self._record_results()
            if not finished:
                self._record_note()
        finally:
            self._lock.release()

    # ---- background ----------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._collect()
                if self._ready():
                    try:
                        self._push()
                    except Exception as e:
                        self._failed(e)
            self._stop.wait(self.interval_s)

    def _collect(self, *, final: bool = False) -> None:
        points = self.follower.read_new(_now_ms(), final=final)
        b = self.backlog
        b.points.extend(points)
        if len(b.points) > MAX_BUFFERED_POINTS:  # bounded memory: the oldest go, and the note says so
            extra = len(b.points) - MAX_BUFFERED_POINTS
            b.dropped += extra
            del b.points[:extra]

    def _ready(self) -> bool:
        return time.monotonic() >= self._next_try and (bool(self.backlog.points) or self.mlflow_run_id is None or not self._params_logged)

    def _failed(self, e: Exception) -> None:
        self.backlog.failures += 1
        self.backlog.last_error = f"{type(e).__name__}: {str(e)[:300]}"
        self._next_try = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.max_backoff_s)

    def _push(self) -> None:
        sink = self._sink_()
        if self.mlflow_run_id is None:
            self.mlflow_run_id = sink.create_run(self._experiment(), self.job.run_id, run_tags_for_tracker(self.led, self.job))
            self.led.add_event(self.job.run_id, TRACKING_EVENT, {
                "mlflow_run_id": self.mlflow_run_id, "tracking_uri": _safe_uri(self.tracking_uri),
            })  # fmt: skip
            self._save_state()
        elif self._need_history:
            self._sent_max = {**sink.logged_max_steps(self.mlflow_run_id), **self._sent_max}
            self._need_history = False
            # What the tracker already holds is not sent again.
            self.backlog.points = [p for p in self.backlog.points if p.step > self._sent_max.get(p.key, -1)]
        if not self._params_logged:
            sink.log_params(self.mlflow_run_id, run_params(self.job.spec))
            self._params_logged = True
            self._save_state()
        while self.backlog.points:
            batch = self.backlog.points[:1000]
            sink.log_metrics(self.mlflow_run_id, batch)
            del self.backlog.points[: len(batch)]
            for p in batch:
                self._sent_max[p.key] = max(self._sent_max.get(p.key, -1), p.step)
            self._save_state()
        self._backoff = self.interval_s
        self._next_try = 0.0

    def _finish(self, state: str) -> None:
        from launcher.tracking.artifacts import write_artifacts

        sink = self._sink_()
        sink.log_metrics(self.mlflow_run_id, end_metrics(self.led, self.job.run_id, _now_ms()))
        digest = self.follower.final_weights_sha256
        if digest:
            sink.set_tags(self.mlflow_run_id, {"final_weights_sha256": digest})
        folder = write_artifacts(self.job, digest)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.parent.relative_to(folder).as_posix()
            sink.log_artifact(self.mlflow_run_id, path, None if rel == "." else rel)
        if self.backlog.dropped or self.backlog.failures:
            sink.set_tags(self.mlflow_run_id, {"mlflow.note.content": self._note_text(logged=True)})
        sink.terminate(self.mlflow_run_id, _STATUS[state])

    # ---- ledger and local state -----------------------------------------------------------
    def _record_results(self, *, from_log: bool = False) -> None:
        digest = self.follower.final_weights_sha256
        if from_log:  # the follower is busy in another thread: read the log's last result here
            digest = MetricFollower(self.follower.path).last_weights() or digest
        data = {"final_weights_sha256": digest} if digest else {}
        if self.enabled:
            data["mlflow_run_id"] = self.mlflow_run_id
        if data:
            self.led.add_event(self.job.run_id, RESULTS_EVENT, data)

    def _record_note(self) -> None:
        self.led.add_event(self.job.run_id, TRACKING_EVENT, {"note": self._note_text(logged=False), "mlflow_run_id": self.mlflow_run_id})

    def _note_text(self, *, logged: bool) -> str:
        b = self.backlog
        parts = []
        if not logged:
            what = []
            if self.mlflow_run_id is None:
                what.append("the run itself (never created)")
            sent = {k: v for k, v in list(self._sent_max.items())}  # the sender may still be adding
            unsent = MetricFollower(self.follower.path, sent).read_new(0, final=True)
            if unsent:
                keys = sorted({p.key for p in unsent})
                what.append(f"{len(unsent)} metric points ({', '.join(keys)})")
            what.append("end metrics, artifacts and the final status")
            parts.append(f"not logged to MLflow at {_safe_uri(self.tracking_uri)}: " + "; ".join(what))
        if b.dropped:
            parts.append(f"{b.dropped} oldest metric points dropped while the tracker was unreachable (buffer full)")
        if b.failures:
            parts.append(f"{b.failures} failed attempt(s) to reach the tracker, last: {b.last_error}")
        return ". ".join(parts) + "."

    def _recorded_run_id(self) -> str | None:
        for e in reversed(self.led.events(self.job.run_id, kind=TRACKING_EVENT)):
            if e.data.get("mlflow_run_id"):
                return str(e.data["mlflow_run_id"])
        return None

    def _load_state(self) -> dict:
        try:
            return json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self) -> None:
        state = {"mlflow_run_id": self.mlflow_run_id, "params_logged": self._params_logged, "logged_max": self._sent_max}
        atomic_write_text(self._state_path, json.dumps(state, sort_keys=True))
        try:
            self._state_path.chmod(0o600)
        except OSError:
            pass

    def _sink_(self):
        if self._sink is None:
            if self._sink_factory is not None:
                self._sink = self._sink_factory(self.tracking_uri)
            else:
                from launcher.tracking.mlflow_sink import MlflowSink

                self._sink = MlflowSink(self.tracking_uri)
        return self._sink

    def _experiment(self) -> str:
        spec = self.job.spec
        return self.job.tags.get("experiment") or spec.launcher.experiment or spec.display_name or spec.launcher.project


def recorded_tracking_uri(ledger, run_id: str) -> str | None:
    """The tracker a run was logged to (recorded without credentials), or None."""
    for e in reversed(ledger.events(run_id, kind=TRACKING_EVENT)):
        if e.data.get("tracking_uri"):
            return str(e.data["tracking_uri"])
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _safe_uri(uri: str | None) -> str | None:
    """The URI without credentials (user:password@ in an http URL)."""
    if uri is None:
        return None
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password or parts.username:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)
