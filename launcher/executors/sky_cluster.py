"""SkyPilot executor for clusters the user already has (Slurm, Kubernetes, SSH node pools).

One attempt = one SkyPilot cluster (`sky.launch` with the entry's infra; on Slurm that is one
Slurm job holding the allocation). A background thread starts our API server (sky_server),
launches, follows the job's output into `runs/<id>/logs/rank-0.log` (so `launcher logs
--follow` works) and polls SkyPilot's job status; `poll()` never blocks on SkyPilot.

SkyPilot reports job status, not exit codes, so the run command is wrapped: it prints
`[launcher] rank R exit_code=N` when the user's command ends, and a job that exits with
PREEMPTED_EXIT_CODE (it saved a checkpoint on SIGTERM) ends as PREEMPTED. Checkpoints live on
the cluster's shared filesystem (`checkpoint_dir` of the entry, one folder per run), so the next
attempt resumes from them. `release()` always runs `sky.down` and then asks SkyPilot whether the
cluster is gone (SkyPilot leaves a cluster UP, holding its Slurm allocation, after a failed setup).

While the launch waits for its allocation (a Slurm job queued behind others), `waiting_for` says
so in SkyPilot's words; after `max_queue_s` queued (the spec's `max_wait`) the launch is cancelled
and the attempt ends NO_CAPACITY. The attempt's SkyPilot job id is kept in the run directory, so a
resumed controller asks SkyPilot what the job did (`ended_job`) and adopts a finished job.
"""

from __future__ import annotations

import re
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import ProviderError
from launcher.executors.base import (
    DEFAULT_GRACE_SECONDS,
    PREEMPTED_EXIT_CODE,
    ExecRequest,
    ExecResult,
    Execution,
    Executor,
    Outcome,
)
from launcher.executors.job_env import job_environment, split_secrets
from launcher.executors.redaction import stream_into_log
from launcher.providers.base import ClusterHandle

EXIT_MARKER = re.compile(r"\[launcher\] rank (\d+) exit_code=(\d+)")
_ACTIVE = ("INIT", "PENDING", "SETTING_UP", "RUNNING")
# SkyPilot's own words when the allocation never came (its Slurm provision_timeout).
_NO_NODES = re.compile(r"did not get nodes allocated|ResourcesUnavailable", re.I)


def sky_cluster_name(handle: ClusterHandle) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", handle.cluster.lower()).strip("-")
    return ("gl-" + s)[:40].rstrip("-")


# SkyPilot gives each of its clusters a HOME of its own on Slurm (~/.sky_clusters/<name>), and
# every attempt is a new cluster: `~` means the job user's real home (from the passwd entry).
_USER_HOME = '"$(getent passwd "$(id -un)" | cut -d: -f6)"'


def _dir_expr(path: str) -> str:
    """A shell expression for a path on the cluster; a leading ~ is the job user's home."""
    if path == "~" or path.startswith("~/"):
        return _USER_HOME + (shlex.quote(path[1:]) if len(path) > 1 else "")
    return shlex.quote(path)


def checkpoint_exports(handle: ClusterHandle, run_id: str) -> str:
    base = handle.extra.get("checkpoint_dir") or "~/.launcher-checkpoints"
    prefix = handle.extra.get("job_prefix") or ""
    if prefix and not prefix.endswith("\n"):
        prefix += "\n"
    return prefix + (
        f"export LAUNCHER_CHECKPOINT_DIR={_dir_expr(base.rstrip('/') + '/' + run_id)}\n"
        'mkdir -p "$LAUNCHER_CHECKPOINT_DIR"\n'
    )


def wrap_run(run: str, exports: str) -> str:
    """The user's run command in its own bash, its exit code printed for us. The wrapper keeps
    running through a SIGTERM (a trap, not an ignore: the job still gets the default action)."""
    return (
        exports
        + "trap 'true' TERM\n"
        + f"bash -c {shlex.quote(run)}\n"
        + "__launcher_rc=$?\n"
        + 'echo "[launcher] rank ${SKYPILOT_NODE_RANK:-0} exit_code=$__launcher_rc"\n'
        + "exit $__launcher_rc\n"
    )


def task_config(request: ExecRequest, handle: ClusterHandle) -> dict[str, Any]:
    """SkyPilot's task (YAML form) for one attempt on a declared cluster. Pure; no sky import."""
    infra = handle.extra.get("infra")
    if not infra:
        raise ProviderError(f"cluster {handle.cluster} has no SkyPilot infra")
    resources: dict[str, Any] = {"infra": infra}
    accelerator = handle.extra.get("accelerator")
    if accelerator and request.gpus_per_node:
        resources["accelerators"] = {accelerator: request.gpus_per_node}
    if request.image_id:
        image = request.image_id
        resources["image_id"] = image if image.startswith("docker:") else f"docker:{image}"
    # Only the spec's envs/secrets and our job variables (launcher.executors.job_env).
    job_vars = {"LAUNCHER_RUN_ID": request.run_id, "LAUNCHER_ATTEMPT": str(request.attempt), "LAUNCHER_CLOUD": handle.provider}
    envs, secrets = split_secrets(job_environment(request.envs, job_vars, host_env={}), request.envs, request.secrets)
    exports = checkpoint_exports(handle, request.run_id)
    cfg: dict[str, Any] = {
        "name": re.sub(r"[^a-z0-9-]+", "-", f"{request.run_id}-a{request.attempt}".lower())[:60],
        "num_nodes": request.num_nodes,
        "resources": resources,
        "envs": envs,
        "run": wrap_run(request.run or "true", exports),
    }
    if secrets:
        cfg["secrets"] = secrets
    if request.workdir is not None:
        cfg["workdir"] = str(request.workdir)
    if request.file_mounts:
        cfg["file_mounts"] = dict(request.file_mounts)
    if request.setup:
        cfg["setup"] = exports + request.setup
    return cfg


def default_sdk():
    from launcher.executors.sky import default_sdk as sdk

    return sdk()


def classify(name: str, codes: dict[int, int], num_nodes: int, *, preemptible: bool, error: str | None = None) -> tuple[Outcome, int | None, str, str]:
    """(outcome, exit code, detail, phase) of a job SkyPilot reports as `name`, with the exit
    codes our run wrapper printed per rank."""
    failing = next((c for _, c in sorted(codes.items()) if c != 0), None)
    if name == "SUCCEEDED":
        return Outcome.SUCCEEDED, 0, "SkyPilot job SUCCEEDED", "run"
    if name == "FAILED_SETUP":
        return Outcome.SETUP_FAILED, None, "SkyPilot job FAILED_SETUP: the setup command failed", "setup"
    if name == "CANCELLED":
        return Outcome.CANCELLED, None, "SkyPilot job CANCELLED", "run"
    if failing is None and len(codes) >= num_nodes:
        # Every rank's command exited 0 and SkyPilot lost the job afterwards: the work is done.
        return Outcome.SUCCEEDED, 0, f"every rank exited 0 (SkyPilot job {name} afterwards)", "run"
    if failing == PREEMPTED_EXIT_CODE:
        return Outcome.PREEMPTED, failing, f"SkyPilot job {name}: the job checkpointed on a preemption notice", "run"
    if name == "FAILED" and failing is not None:
        return Outcome.FAILED, failing, f"SkyPilot job FAILED (exit {failing})", "run"
    # The driver or the allocation went away under the job.
    why = error or f"SkyPilot job {name}"
    if preemptible:
        return Outcome.PREEMPTED, None, f"{why} (preemptible cluster)", "run"
    return Outcome.NODE_LOST, None, why, "run"


def exit_codes(log: Path) -> dict[int, int]:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    return {int(r): int(c) for r, c in EXIT_MARKER.findall(text)}


@dataclass
class SkyClusterExecutor(Executor):
    sdk: Any = None
    poll_interval_s: float = 5.0
    unreachable_polls: int = 3
    ensure_server: Callable[[], int] | None = None
    pending_check_s: float = 10.0  # how often a launch asks SkyPilot what it waits for
    name: str = "sky-cluster"

    def _sdk(self):
        if self.sdk is None:
            from launcher.executors.sky_server import ensure_server

            (self.ensure_server or ensure_server)()
            self.sdk = default_sdk()
        return self.sdk

    def start(self, request: ExecRequest, handle: ClusterHandle) -> SkyClusterExecution:
        cfg = task_config(request, handle)
        execution = SkyClusterExecution(self, handle, cfg, request)
        execution.begin()
        return execution

    def release(self, handle: ClusterHandle) -> None:
        """`sky down` the attempt's SkyPilot cluster (frees the Slurm allocation), then ask SkyPilot
        that it is gone (bounded). Already gone = fine; still listed = ProviderError."""
        from launcher.executors.sky_cluster_state import down_verified

        down_verified(self._sdk(), [sky_cluster_name(handle)])

    def leftovers(self, names: list[str] | None = None) -> dict[str, str]:
        """Which SkyPilot clusters (of `names`; all with None) SkyPilot still lists: name -> status."""
        from launcher.executors.sky_cluster_state import listed

        return listed(self._sdk(), names)

    def down(self, names: list[str]) -> list[str]:
        """`sky down` those of `names` that SkyPilot lists, verified; returns the names taken down."""
        from launcher.executors.sky_cluster_state import down_verified

        return down_verified(self._sdk(), names, only_listed=True)

    def ended_job(self, handle: ClusterHandle, run_dir: Path, attempt: int, num_nodes: int, secrets=()) -> tuple[str, object | None]:
        """What the attempt's job did while no controller watched, asked of SkyPilot: (SkyPilot's
        status or 'gone', an EndedJob when it ended on its own). A finished job's whole output
        replaces the log the dead controller's stream left. None: still running, or lost."""
        from launcher.executors.job_status import RECORDABLE, EndedJob
        from launcher.executors.sky_cluster_state import fetch_log, job_status, recorded_job_id

        name = sky_cluster_name(handle)
        sdk = self._sdk()
        job_id, status = job_status(sdk, name, recorded_job_id(run_dir, attempt))
        if status is None:
            return "gone", None
        if status in _ACTIVE:
            return status, None
        log = Path(run_dir) / "logs" / "rank-0.log"
        fetch_log(sdk, name, job_id, log, secrets)
        outcome, code, detail, _ = classify(status, exit_codes(log), num_nodes, preemptible=handle.extra.get("preemptible") == "true")
        if outcome not in RECORDABLE:
            return status, None
        return status, EndedJob(outcome, code if code is not None else 1, detail, source=f"SkyPilot's job table ({name} job {job_id})")


class SkyClusterExecution(Execution):
    def __init__(self, executor: SkyClusterExecutor, handle: ClusterHandle, cfg: dict, request: ExecRequest) -> None:
        self.executor = executor
        self.handle = handle
        self.cfg = cfg
        self.request = request
        self.cluster_name = sky_cluster_name(handle)
        self.preemptible = handle.extra.get("preemptible") == "true"
        self.phase = "launch"
        self.job_id: int | None = None
        self._request_id = None
        self._status: str | None = None
        self._error: str | None = None
        self._cancelled = threading.Event()
        self._notified = False
        self._result: ExecResult | None = None
        self._log_thread: threading.Thread | None = None
        self._log = Path(request.run_dir) / "logs" / "rank-0.log"
        self._queued_since: float | None = None
        self._queue_detail = ""
        self._no_capacity: str | None = None
        self.waiting_for: str | None = None
        self._thread = threading.Thread(target=self._drive, name=f"sky-{self.cluster_name}", daemon=True)

    def begin(self) -> None:
        self._log.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    # ---- background -------------------------------------------------------------------------
    def _drive(self) -> None:
        from launcher.executors.sky_server import request_log_tail

        try:
            sdk = self.executor._sdk()
            task = sdk.Task.from_yaml_config(self.cfg)
            if self._cancelled.is_set():
                return
            self._request_id = sdk.launch(task, cluster_name=self.cluster_name, retry_until_up=False)
            got = self._await_launch(sdk)
            if got is None:  # cancelled, or queued past the bound
                return
            job_id = got[0]
        except BaseException as e:  # noqa: BLE001 - surfaced through poll()
            cause = request_log_tail(self._request_id)
            self._error = f"SkyPilot launch failed: {type(e).__name__}: {e}" + (f"\nSkyPilot's log:\n{cause}" if cause else "")
            if self._queued_since is not None and _NO_NODES.search(self._error):
                self._no_capacity = f"{self._queue_words()}; SkyPilot gave up waiting for the allocation"
            return
        self.job_id = job_id
        self.waiting_for = None
        from launcher.executors.sky_cluster_state import record_job

        record_job(Path(self.request.run_dir), self.request.attempt, self.cluster_name, job_id)
        self.phase = "run"
        self._log_thread = threading.Thread(target=self._follow_logs, name=f"sky-logs-{self.cluster_name}", daemon=True)
        self._log_thread.start()
        unreachable = 0
        while not self._cancelled.is_set():
            try:
                statuses = sdk.get(sdk.job_status(self.cluster_name, job_ids=[job_id]))
                unreachable = 0
            except Exception as e:  # noqa: BLE001 - the cluster is unreachable (allocation gone?)
                unreachable += 1
                if unreachable >= self.executor.unreachable_polls:
                    self._error = f"SkyPilot cannot reach the cluster: {e}"
                    self._status = "UNREACHABLE"
                    return
                time.sleep(self.executor.poll_interval_s)
                continue
            status = (statuses or {}).get(job_id)
            name = str(getattr(status, "value", status)) if status is not None else "LOST"
            if name not in _ACTIVE:
                if self._log_thread is not None:
                    self._log_thread.join(timeout=30)  # the log stream ends with the job
                self._status = name
                return
            self._cancelled.wait(self.executor.poll_interval_s)

    def _await_launch(self, sdk):
        """SkyPilot's launch result; meanwhile ask what it waits for. None when cancelled or when
        the allocation stayed queued longer than the request's `max_queue_s` (launch cancelled)."""
        from launcher.executors.sky_cluster_state import launch_detail

        box: dict = {}

        def get() -> None:
            try:
                box["value"] = sdk.get(self._request_id)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                box["error"] = e

        t = threading.Thread(target=get, name=f"sky-launch-{self.cluster_name}", daemon=True)
        t.start()
        clock = time.monotonic
        next_check = clock() + self.executor.pending_check_s
        limit = self.request.max_queue_s
        while t.is_alive():
            t.join(0.5)
            if self._cancelled.is_set():
                return None  # stop() cancels the request
            if clock() < next_check or not t.is_alive():
                continue
            next_check = clock() + self.executor.pending_check_s
            try:
                detail = launch_detail(sdk, self.cluster_name, timeout_s=60.0)
            except Exception:  # noqa: BLE001 - only the report of the wait is lost
                detail = None
            if detail and "pending" in detail.lower():
                self._queued_since = self._queued_since or clock()
                self._queue_detail = detail
                self.waiting_for = self._queue_words()
            if self._queued_since is not None and limit is not None and clock() - self._queued_since >= limit:
                try:
                    sdk.api_cancel(self._request_id)
                except Exception:  # noqa: BLE001 - release (sky down) removes the queued job either way
                    pass
                self._no_capacity = f"{self._queue_words()}; gave up after {clock() - self._queued_since:.0f}s queued (launcher: max_wait)"
                return None
        if "error" in box:
            raise box["error"]
        return box["value"][:2]

    def _queue_words(self) -> str:
        """What the launch waits for (stable while SkyPilot says the same: shown once per change)."""
        kind = "Slurm job" if str(self.handle.extra.get("infra", "")).startswith("slurm/") else "allocation"
        return (f"the {kind} of SkyPilot cluster {self.cluster_name} is queued behind other jobs on "
                f"{self.handle.extra.get('infra') or self.handle.region} (SkyPilot: {self._queue_detail})")  # fmt: skip

    def _follow_logs(self) -> None:
        sdk = self.executor._sdk()
        stream_into_log(  # status comes from SkyPilot: a broken stream only ends the log
            self._log, self.request.secrets,
            lambda out: sdk.tail_logs(self.cluster_name, self.job_id, follow=True, output_stream=out),
        )  # fmt: skip

    # ---- Execution ------------------------------------------------------------------------------
    def poll(self) -> ExecResult | None:
        if self._result is not None:
            return self._result
        if self._thread.is_alive():
            return None
        if self._cancelled.is_set():
            self._result = self._finish(Outcome.CANCELLED, None, "cancelled")
        elif self._no_capacity is not None:
            self._result = ExecResult(Outcome.NO_CAPACITY, None, "setup", detail=self._no_capacity)
        elif self._status is None:
            self._result = self._finish(Outcome.SETUP_FAILED if self._error else Outcome.CANCELLED, None, self._error or "", phase="setup")
        else:
            self._result = self._from_status(self._status)
        return self._result

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        self._thread.join(timeout=timeout_s)
        return self.poll()

    def stop(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> ExecResult:
        self._cancelled.set()
        try:
            sdk = self.executor._sdk()
            if self.job_id is not None:
                sdk.get(sdk.cancel(self.cluster_name, job_ids=[self.job_id]))
            elif self._request_id is not None:
                sdk.api_cancel(self._request_id)
        except Exception:  # noqa: BLE001 - `release` (sky down) ends it either way
            pass
        self._thread.join(timeout=max(grace_s, 30.0))
        if self._result is None:
            self._result = self._finish(Outcome.CANCELLED, None, "cancelled")
        return self._result

    def notify_preemption(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> None:
        self._notified = True

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()

    # ---- classification ---------------------------------------------------------------------------
    def exit_codes(self) -> dict[int, int]:
        return exit_codes(self._log)

    def _finish(self, outcome: Outcome, exit_code: int | None, detail: str, phase: str = "run") -> ExecResult:
        if self._notified and outcome in (Outcome.FAILED, Outcome.NODE_LOST, Outcome.CANCELLED):
            outcome = Outcome.PREEMPTED
        return ExecResult(outcome, exit_code, phase, detail=detail)

    def _from_status(self, name: str) -> ExecResult:
        outcome, code, detail, phase = classify(name, self.exit_codes(), self.request.num_nodes, preemptible=self.preemptible, error=self._error)
        return self._finish(outcome, code, detail, phase=phase)
