"""SkyPilot executor: run a task on a cluster we provisioned (infra/ Pulumi stack) by
registering its nodes as a SkyPilot SSH node pool and launching the task there.

Flow of one attempt (a background thread drives the slow SDK calls; `poll()` never blocks on them):

1. our entry `gl-<cluster>` is merged into `~/.sky/ssh_node_pools.yaml` (file lock + atomic write):
   `{user, identity_file, hosts: [node IPs]}`, SkyPilot's SSH Node Pools format;
2. `sky.client.sdk.ssh_up(infra=pool, file=...)` deploys the pool (SkyPilot's k3s on the nodes);
3. `sky.launch(task, cluster_name=...)` with `resources.infra: ssh/<pool>`, the job's
   `image_id: docker:...`, accelerators, labels (our tags), envs, workdir, file_mounts with the
   cluster's checkpoint bucket mounted at /checkpoints (MOUNT_CACHED);
4. `poll()` asks `sky.job_status`; when SkyPilot cannot reach the cluster, or the job's driver
   died, the provider says whether nodes are gone and whether the cloud reclaimed them:
   PREEMPTED (spot reclaim), NODE_LOST (a node vanished), else FAILED / SETUP_FAILED.

Recovery stays with our controller: no SkyPilot managed jobs, no `retry_until_up`, no autostop.
`sky` is imported only on this path (it costs seconds); usage collection is off unless the user
set SKYPILOT_DISABLE_USAGE_COLLECTION themselves. SkyPilot reports job status, not exit codes,
so a failed run has `exit_code=None` and a detail naming SkyPilot's status.
"""

from __future__ import annotations

import functools
import os
import sys
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from launcher.executors.container import sky_image_id
from launcher.errors import ProviderError
from launcher.executors.base import (
    DEFAULT_GRACE_SECONDS,
    ExecRequest,
    ExecResult,
    Execution,
    Executor,
    Outcome,
)
from launcher.executors.job_env import job_environment, split_secrets
from launcher.executors.redaction import stream_into_log
from launcher.providers.base import ClusterHandle, Provider, ReclaimCheck

CHECKPOINT_MOUNT = "/checkpoints"
TELEMETRY_ENV = "SKYPILOT_DISABLE_USAGE_COLLECTION"
_BUCKET_SCHEME = {"aws": "s3", "gcp": "gs"}
_GONE_STATES = (None, "terminated", "stopping", "stopped")


# ---- pure: names, node pool entry, task config ------------------------------------------------
def _slug(text: str, max_chars: int) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return (s[:max_chars].rstrip("-")) or "x"


def pool_name(handle: ClusterHandle) -> str:
    """SSH node pool name for a cluster (becomes a k8s context name: lowercase, dashes)."""
    return "gl-" + _slug(handle.cluster, 40)


def sky_cluster_name(handle: ClusterHandle) -> str:
    return pool_name(handle) + "-job"


def bucket_url(handle: ClusterHandle) -> str | None:
    bucket = handle.extra.get("bucket")
    if not bucket:
        return None
    if "://" in bucket:
        return bucket
    return f"{_BUCKET_SCHEME.get(handle.provider, 's3')}://{bucket}"


def node_pool_entry(handle: ClusterHandle, *, identity_file: str | None) -> dict[str, Any]:
    """One entry of ~/.sky/ssh_node_pools.yaml; rank 0 first (SkyPilot's head)."""
    ips = [n.ip for n in sorted(handle.nodes, key=lambda n: n.rank)]
    if not ips or any(not ip for ip in ips):
        raise ProviderError(f"cluster {handle.cluster} has nodes without an IP; cannot build an SSH node pool")
    entry: dict[str, Any] = {"user": handle.extra.get("ssh_user", "ubuntu"), "hosts": ips}
    if identity_file:
        entry["identity_file"] = identity_file
    return entry


def sky_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """Our tags as SkyPilot labels (they become k8s pod labels on an SSH node pool): the GCP
    label mapping from infra.tags fits k8s label rules too (lowercase, [a-z0-9_-], <= 63)."""
    from infra.tags import to_gcp_labels

    return to_gcp_labels(tags)


def task_config(
    request: ExecRequest,
    handle: ClusterHandle,
    *,
    accelerator: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The SkyPilot task (YAML form) for one attempt on `handle`'s node pool. Pure; no sky import."""
    resources: dict[str, Any] = {"infra": f"ssh/{pool_name(handle)}"}
    if accelerator and request.gpus_per_node:
        resources["accelerators"] = {accelerator: request.gpus_per_node}
    if request.image_id:
        resources["image_id"] = sky_image_id(request.image_id)
    if labels:
        resources["labels"] = dict(labels)
    job_vars = {
        "LAUNCHER_RUN_ID": request.run_id,
        "LAUNCHER_ATTEMPT": str(request.attempt),
        "LAUNCHER_CLOUD": handle.provider,
    }
    file_mounts: dict[str, Any] = dict(request.file_mounts)
    bucket = bucket_url(handle)
    if bucket:
        # Checkpoints live in the cluster's bucket; MOUNT_CACHED writes back asynchronously,
        # so a checkpoint survives the node (our checkpoint helpers fsync before they rename).
        file_mounts[CHECKPOINT_MOUNT] = {"source": bucket, "mode": "MOUNT_CACHED"}
        job_vars["LAUNCHER_CHECKPOINT_DIR"] = CHECKPOINT_MOUNT
    # Only the spec's envs/secrets and our job variables: nothing of this process's environment
    # (the node's own login environment gives PATH, HOME, locale).
    envs, secrets = split_secrets(job_environment(request.envs, job_vars, host_env={}), request.envs, request.secrets)
    cfg: dict[str, Any] = {
        "name": _slug(f"{request.run_id}-a{request.attempt}", 60),
        "num_nodes": request.num_nodes,
        "resources": resources,
        "envs": envs,
    }
    if secrets:
        cfg["secrets"] = secrets
    if request.workdir is not None:
        cfg["workdir"] = str(request.workdir)
    if file_mounts:
        cfg["file_mounts"] = file_mounts
    if request.setup:
        cfg["setup"] = request.setup
    if request.run:
        cfg["run"] = request.run
    return cfg


# ---- the SDK surface we use (injectable) ------------------------------------------------------
def default_sdk() -> SimpleNamespace:
    """SkyPilot's client SDK functions, imported on first use with telemetry off by default."""
    os.environ.setdefault(TELEMETRY_ENV, "1")
    try:
        import sky
        from sky.client import sdk
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ProviderError("SkyPilot is not installed", hint="pip install 'gpu-launcher[sky]'") from e
    calls = {
        name: _keep_tracebacks(getattr(sdk, name))
        for name in ("launch", "get", "job_status", "tail_logs", "cancel", "down", "ssh_up", "ssh_down", "api_cancel", "status")
    }
    return SimpleNamespace(Task=sky.Task, JobStatus=sky.JobStatus, **calls)


def _keep_tracebacks(fn):
    """SkyPilot sets `sys.tracebacklimit = 0` while it raises and does not restore it when the
    exception propagates; Pulumi (and our --debug output) then sees an empty stack. Restore it."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        had, saved = hasattr(sys, "tracebacklimit"), getattr(sys, "tracebacklimit", None)
        try:
            return fn(*args, **kwargs)
        finally:
            if had:
                sys.tracebacklimit = saved
            elif hasattr(sys, "tracebacklimit"):
                del sys.tracebacklimit

    return call


def write_node_pool(path: Path, pool: str, entry: Mapping[str, Any] | None) -> None:
    """Merge (or with entry=None remove) our pool in the SSH node pools file, keeping the
    user's other pools; under a file lock, written atomically."""
    import yaml
    from filelock import FileLock

    from launcher.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=30):
        current = yaml.safe_load(path.read_text()) if path.exists() else None
        pools = dict(current or {})
        if entry is None:
            pools.pop(pool, None)
        else:
            pools[pool] = dict(entry)
        atomic_write_text(path, yaml.safe_dump(pools, sort_keys=True))


def _default_identity_file() -> str | None:
    for name in ("id_ed25519", "id_rsa"):
        p = Path.home() / ".ssh" / name
        if p.is_file():
            return str(p)
    return None


# ---- executor ---------------------------------------------------------------------------------
@dataclass
class SkyExecutor(Executor):
    """`accelerator` (e.g. 'L4') and `tags` come from the chosen offer and the run; `provider`
    (or `provider_for`, which gives the cluster's cloud's provider) lets a failed or unreachable
    job be told apart as preempted / node lost / failed."""

    accelerator: str | None = None
    tags: Mapping[str, str] | None = None
    provider: Provider | None = None
    sdk: Any = None
    pools_file: Path | None = None
    identity_file: str | None = None
    poll_interval_s: float = 10.0
    unreachable_polls: int = 3
    provider_for: Callable[[str], Provider] | None = None  # without `provider`: the cluster's cloud's own (aws/gcp)
    stream_logs: bool = True  # follow the job's output into runs/<id>/logs/rank-0.log
    clock: Callable[[], float] = time.monotonic
    name: str = "sky"

    def _sdk(self):
        if self.sdk is None:
            self.sdk = default_sdk()
        return self.sdk

    def task_config(self, request: ExecRequest, handle: ClusterHandle) -> dict[str, Any]:
        labels = sky_labels(self.tags) if self.tags else None
        # The controller builds executors by cloud name only; the stack records the offer's GPU.
        accelerator = self.accelerator or handle.extra.get("accelerator")
        return task_config(request, handle, accelerator=accelerator, labels=labels)

    def task(self, request: ExecRequest, handle: ClusterHandle):
        """SkyPilot's own Task object for this attempt (validates field names and values)."""
        return self._sdk().Task.from_yaml_config(self.task_config(request, handle))

    def start(self, request: ExecRequest, handle: ClusterHandle) -> SkyExecution:
        task = self.task(request, handle)  # bad config fails here, before anything is deployed
        pools = self.pools_file or Path(os.path.expanduser("~/.sky/ssh_node_pools.yaml"))
        entry = node_pool_entry(handle, identity_file=self.identity_file or _default_identity_file())
        execution = SkyExecution(self, handle, task, pools, entry, request)
        execution._begin()
        return execution

    def release(self, handle: ClusterHandle) -> None:
        """Tear down SkyPilot's view of the cluster (its k3s cluster and our pool entry); the
        machines themselves belong to the Pulumi stack and go with it."""
        sdk = self._sdk()
        for call in (lambda: sdk.down(sky_cluster_name(handle)), lambda: sdk.ssh_down(pool_name(handle))):
            try:
                sdk.get(call())
            except Exception:  # already gone is fine; the stack teardown removes the machines
                pass
        pools = self.pools_file or Path(os.path.expanduser("~/.sky/ssh_node_pools.yaml"))
        write_node_pool(pools, pool_name(handle), None)


class SkyExecution(Execution):
    def __init__(self, executor: SkyExecutor, handle: ClusterHandle, task, pools: Path, entry: dict, request) -> None:
        self.executor = executor
        self.handle = handle
        self.task = task
        self.pools = pools
        self.entry = entry
        self.request = request
        self.cluster_name = sky_cluster_name(handle)
        self.job_id: int | None = None
        self.phase = "deploy"  # deploy -> launch -> run
        self._launch_error: BaseException | None = None
        self._request_id = None
        self._result: ExecResult | None = None
        self._notified = False
        self._cancelled = False
        self._unreachable = 0
        self._last_poll = float("-inf")
        self._thread = threading.Thread(target=self._drive, name=f"sky-{self.cluster_name}", daemon=True)

    # ---- background: deploy the pool, launch the task -------------------------------------------
    def _begin(self) -> None:
        write_node_pool(self.pools, pool_name(self.handle), self.entry)
        self._thread.start()

    def _drive(self) -> None:
        sdk = self.executor._sdk()
        try:
            self._request_id = sdk.ssh_up(infra=pool_name(self.handle), file=str(self.pools))
            sdk.get(self._request_id)
            if self._cancelled:
                return
            self.phase = "launch"
            self._request_id = sdk.launch(
                self.task, cluster_name=self.cluster_name, retry_until_up=False, down=False
            )
            job_id, _handle = sdk.get(self._request_id)[:2]
            self.job_id = job_id
            self.phase = "run"
        except BaseException as e:  # noqa: BLE001 - surfaced through poll()
            self._launch_error = e
            return
        if self.executor.stream_logs:
            threading.Thread(target=self._follow_logs, name=f"sky-logs-{self.cluster_name}", daemon=True).start()

    def _follow_logs(self) -> None:
        """SkyPilot streams every node's output (prefixed with its rank) into one file, where
        `launcher logs` tails rank-0.log as it does for the local executor."""
        log = Path(self.request.run_dir) / "logs" / "rank-0.log"
        sdk = self.executor._sdk()
        stream_into_log(  # status comes from poll(): a broken stream only ends the log
            log, self.request.secrets,
            lambda out: sdk.tail_logs(self.cluster_name, self.job_id, follow=True, output_stream=out),
        )  # fmt: skip

    # ---- Execution ------------------------------------------------------------------------------
    def poll(self) -> ExecResult | None:
        if self._result is not None:
            return self._result
        if self._thread.is_alive():
            return None
        if self._launch_error is not None:
            self._result = self._from_launch_error(self._launch_error)
            return self._result
        if self._cancelled and self.job_id is None:
            self._result = self._finish(Outcome.CANCELLED, None, "cancelled before the job started")
            return self._result
        now = self.executor.clock()
        if now - self._last_poll < self.executor.poll_interval_s:
            return None
        self._last_poll = now
        sdk = self.executor._sdk()
        try:
            statuses = sdk.get(sdk.job_status(self.cluster_name, job_ids=[self.job_id]))
        except Exception as e:  # noqa: BLE001 - the cluster is unreachable (or SkyPilot is)
            self._unreachable += 1
            if self._unreachable < self.executor.unreachable_polls:
                return None
            self._result = self._lost(f"SkyPilot cannot reach the cluster: {e}")
            return self._result
        self._unreachable = 0
        status = (statuses or {}).get(self.job_id)
        if status is None:  # SkyPilot's job table lost the job: the head node was replaced or wiped
            self._result = self._lost("SkyPilot no longer knows the job")
            return self._result
        name = str(getattr(status, "value", status))
        if name in ("INIT", "PENDING", "SETTING_UP", "RUNNING"):
            return None
        self._result = self._from_status(name)
        return self._result

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            res = self.poll()
            if res is not None:
                return res
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(min(1.0, self.executor.poll_interval_s))

    def stop(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> ExecResult:
        self._cancelled = True
        sdk = self.executor._sdk()
        if self.job_id is not None:
            try:
                sdk.get(sdk.cancel(self.cluster_name, job_ids=[self.job_id]))
            except Exception:  # noqa: BLE001 - unreachable cluster: nothing left to cancel
                pass
        elif self._request_id is not None and self._thread.is_alive():
            try:
                sdk.api_cancel(self._request_id)
            except Exception:  # noqa: BLE001
                pass
        self._thread.join(timeout=grace_s)
        if self._result is None or self._result.outcome is not Outcome.PREEMPTED:
            self._result = self._finish(Outcome.PREEMPTED if self._notified else Outcome.CANCELLED, None, "cancelled")
        return self._result

    def notify_preemption(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> None:
        # The job watches the cloud's own notice (launcher.checkpoint.notice); the controller
        # only records it, so whatever ends the job next is reported as a preemption.
        self._notified = True

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()  # the job runs remotely

    @property
    def image_runtime(self) -> str:
        return "docker" if self.request.image_id else "host"

    # ---- classification -------------------------------------------------------------------------
    def _finish(self, outcome: Outcome, exit_code: int | None, detail: str, phase: str = "run") -> ExecResult:
        if self._notified and outcome in (Outcome.FAILED, Outcome.NODE_LOST, Outcome.CANCELLED):
            outcome = Outcome.PREEMPTED
        return ExecResult(outcome, exit_code, phase, image_runtime=self.image_runtime, detail=detail)

    def _from_status(self, name: str) -> ExecResult:
        if name == "SUCCEEDED":
            return self._finish(Outcome.SUCCEEDED, 0, "SkyPilot job SUCCEEDED")
        if name == "FAILED_SETUP":
            return self._finish(Outcome.SETUP_FAILED, None, "SkyPilot job FAILED_SETUP", phase="setup")
        if name == "CANCELLED":
            return self._finish(Outcome.CANCELLED, None, "SkyPilot job CANCELLED")
        if name == "FAILED_DRIVER":  # the job's driver vanished: usually a node went away
            return self._lost("SkyPilot job FAILED_DRIVER")
        gone = self._gone_nodes()
        if gone:
            return self._lost(f"SkyPilot job {name}")
        return self._finish(Outcome.FAILED, None, f"SkyPilot job {name} (SkyPilot reports no exit code)")

    def _lost(self, why: str) -> ExecResult:
        gone = self._gone_nodes()
        provider = self._provider()
        reclaimed = [
            iid
            for iid in gone
            if isinstance(provider, ReclaimCheck)
            and provider.was_preempted(self._where_preempted(), iid)
        ]
        if reclaimed:
            return self._finish(Outcome.PREEMPTED, None, f"{why}; reclaimed by the cloud: {', '.join(reclaimed)}")
        if gone:
            return self._finish(Outcome.NODE_LOST, None, f"{why}; nodes gone: {', '.join(gone)}")
        return self._finish(Outcome.NODE_LOST, None, why)

    def _where_preempted(self) -> str:
        # GCP records reclaims per zone (and a deleted VM's zone cannot be looked up); AWS by region.
        return (self.handle.zone or self.handle.region) if self.handle.provider == "gcp" else self.handle.region

    def _provider(self) -> Provider | None:
        lookup = self.executor.provider_for
        if self.executor.provider is None and lookup is not None and self.handle.provider in ("aws", "gcp"):
            try:
                self.executor.provider = lookup(self.handle.provider)
            except Exception:  # noqa: BLE001 - without it we report NODE_LOST, not PREEMPTED
                return None
        return self.executor.provider

    def _gone_nodes(self) -> list[str]:
        provider = self._provider()
        if provider is None:
            return []
        gone = []
        for node in self.handle.nodes:
            try:
                state = provider.instance_state(self.handle.region, node.instance_id)
            except Exception:  # noqa: BLE001 - cannot tell; do not claim the node is gone
                continue
            if state in _GONE_STATES:
                gone.append(node.instance_id)
        return gone

    def _from_launch_error(self, e: BaseException) -> ExecResult:
        if self._cancelled:
            return self._finish(Outcome.CANCELLED, None, f"cancelled during {self.phase}")
        gone = self._gone_nodes()
        if gone:
            return self._lost(f"{self.phase} failed: {type(e).__name__}: {e}")
        phase = "setup"
        return self._finish(Outcome.SETUP_FAILED, None, f"{self.phase} failed: {type(e).__name__}: {e}", phase=phase)
