"""Run a task here: `num_nodes` ranks, each a process group (setsid) running `bash -c`.

Layout (under the run directory `$LAUNCHER_HOME/runs/<run-id>/`):
    logs/rank-N.log   stdout+stderr of rank N, appended across phases and attempts
    procs.json        process groups of the running attempt (for `down` after a crash)

Phases follow SkyPilot: `setup` runs on every rank; when all succeeded, `run` starts on every
rank. A failing rank in `run` gets the others stopped (SIGTERM, grace, SIGKILL) so a DDP job
does not hang. The job sees SkyPilot's variables plus ours and nothing of the launcher's own
environment beyond an allow-list (see `rank_env`, launcher.executors.job_env).

Jobs write straight to their log files (not through a pipe to the controller), so a job keeps
running and logging when the controller dies; the terminal view tails those files
(launcher.controller.logs). A task with `secrets:` writes through a relay process of its own
instead, which replaces the values before they reach the file (launcher.executors.log_relay).

`image_id` (`docker:<ref>` or a bare `<ref>`): each rank runs in `podman run` or `docker run`,
whichever starts the image here (launcher.executors.container: probed once per executor and
image, local images only), with the workdir, checkpoint dir and run dir mounted at the same paths
and only the job's variables passed in. A runtime that cannot start the image ends the attempt
at once without starting a rank: FAILED, exit 125, not retryable, the runtime's reason as its
detail. With no container runtime installed the job runs on the host and the result says
`image_runtime="host"` (the controller records it).
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher import paths
from launcher.atomic import atomic_write_text
from launcher.executors import job_cgroup
from launcher.executors.container import RUNTIME_EXIT_CODES, ContainerRuntime, ContainerRuntimeError, select_runtime
from launcher.executors.job_env import JOB_VAR_NAMES, JOB_VAR_PREFIXES, job_environment
from launcher.executors.job_user import JobUser, grant
from launcher.executors.job_status import exit_path, record_attempt, wrap_argv
from launcher.procfs import (
    group_has_live_process,
    process_group,
    process_start_ticks,
    run_lone_processes,
    run_process_groups,
    running_since,
    session_and_descendants,
)
from launcher.executors.base import (
    DEFAULT_GRACE_SECONDS,
    PREEMPTED_EXIT_CODE,
    ExecRequest,
    ExecResult,
    Execution,
    Executor,
    Outcome,
    RankExit,
)
from launcher.executors.log_relay import job_output, wait_relays
from launcher.providers.base import ClusterHandle

PROCS_FILE = "procs.json"
STRAYS_GONE_S = 5.0  # how long a finished phase waits for the SIGKILLed strays of its job to die
JOB_DIR = "job"  # a job run as another user without a workdir starts here (its own directory)
RELAY_DRAIN_S = 3.0  # how long a finished phase waits for its log relays to write the last bytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_path(run_dir: Path, rank: int) -> Path:
    return run_dir / "logs" / f"rank-{rank}.log"


def rank_env(
    request: ExecRequest,
    rank: int,
    *,
    phase: str,
    master_port: int,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one rank (launcher.executors.job_env): the allow-listed names of `base`
    (default os.environ) with this interpreter's directory first on PATH (so `python` is the
    launcher's venv), the task's envs/secrets, then SkyPilot's and our variables (ours win: a
    spec cannot fake its rank)."""
    ips = "\n".join(["127.0.0.1"] * request.num_nodes)
    task_id = request.task_id or f"{request.run_id}-a{request.attempt}"
    job_vars = {
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": ips,
        "SKYPILOT_NUM_NODES": str(request.num_nodes),
        "SKYPILOT_NUM_GPUS_PER_NODE": str(request.gpus_per_node),
        "SKYPILOT_TASK_ID": task_id,
        "LAUNCHER_RUN_ID": request.run_id,
        "LAUNCHER_ATTEMPT": str(request.attempt),
        "LAUNCHER_CLOUD": "local",
        "LAUNCHER_PYTHON": sys.executable,
        "LAUNCHER_PHASE": phase,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
    }
    if phase == "setup":
        job_vars["SKYPILOT_SETUP_NODE_RANK"] = str(rank)
        job_vars["SKYPILOT_SETUP_NODE_IPS"] = ips
    if request.checkpoint_dir is not None:
        job_vars["LAUNCHER_CHECKPOINT_DIR"] = str(request.checkpoint_dir)
    return job_environment(
        {"PYTHONUNBUFFERED": "1", **request.envs}, job_vars, host_env=base, path_first=[str(Path(sys.executable).parent)]
    )


def container_env_names(env: Mapping[str, str], request: ExecRequest) -> list[str]:
    """The variables of the job's environment (launcher.executors.job_env) a containerized rank
    gets: the job variables and the task's own envs/secrets. The host part (PATH, HOME, the
    Python search path) and the host interpreter's path stay outside: the image has its own."""
    return [
        k for k in env
        if k in request.envs or k == "PYTHONUNBUFFERED"
        or ((k.startswith(JOB_VAR_PREFIXES) or k in JOB_VAR_NAMES) and k != "LAUNCHER_PYTHON")
    ]  # fmt: skip


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    """Does the group have a member that is not a zombie? (A zombie leader waiting for its
    parent to reap it still answers killpg(pgid, 0) but has nothing left to stop.)"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    return group_has_live_process(pgid)


def _signal_strays(strays: dict[int, int | None], sig: int) -> None:
    """Signal processes found by `session_and_descendants`, unless their pid was reused since."""
    for pid, ticks in strays.items():
        if ticks is not None and process_start_ticks(pid) == ticks:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _strays_alive(strays: dict[int, int | None]) -> bool:
    return any(running_since(pid, t) for pid, t in strays.items())


def _await_strays_gone(strays: dict[int, int | None], timeout_s: float) -> None:
    """A SIGKILLed process dies when the kernel next runs it: on a loaded machine that can take a
    moment. Wait (bounded) so that a stopped job's processes are gone when stop() returns."""
    deadline = time.monotonic() + timeout_s
    while _strays_alive(strays) and time.monotonic() < deadline:
        time.sleep(0.01)


def write_procs_file(run_dir: Path, data: dict) -> None:
    """The job's process ids, for a later command to stop them after a controller crash. Replaced
    atomically but not fsynced: process ids mean nothing after a power loss."""
    try:
        atomic_write_text(run_dir / PROCS_FILE, json.dumps(data), durable=False)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full disk: the ids stay in memory (the live controller stops the job); the cgroup and
        # LAUNCHER_RUN_ID still find the job after a crash.


def kill_recorded_processes(run_dir: Path, grace_s: float = DEFAULT_GRACE_SECONDS, *, run_id: str | None = None) -> list[int]:
    """Stop a run's processes after a controller crash: the process groups listed in
    `procs.json` (only when the leader still has the recorded start time: a recycled pid is left
    alone), when `run_id` is given any process carrying LAUNCHER_RUN_ID=<run_id> and everything
    in the run's cgroup, and the processes tied to those groups (their sessions, descendants).
    SIGTERM, up to `grace_s` to exit, then SIGKILL. Returns the pgids that were signalled."""
    try:
        data = json.loads((run_dir / PROCS_FILE).read_text())
    except (OSError, ValueError):
        data = {}
    candidates: list[int] = []
    for p in data.get("procs", []):
        pgid, ticks = int(p["pgid"]), p.get("start_ticks")
        now_ticks = process_start_ticks(pgid)
        if now_ticks is not None and ticks is not None and now_ticks != ticks:
            continue  # the pid was reused by an unrelated process
        candidates.append(pgid)
    if run_id is not None:
        candidates += sorted(run_process_groups(run_id) - set(candidates))
    cgroup = job_cgroup.run_cgroup(run_id) if run_id is not None else None
    strays = session_and_descendants(set(candidates))
    if run_id is not None:
        strays |= run_lone_processes(run_id)  # each by itself: its group is not the run's
    targets = [g for g in candidates if _signal_group(g, signal.SIGTERM)]
    _signal_strays(strays, signal.SIGTERM)
    job_cgroup.terminate(cgroup)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (
        any(_group_alive(g) for g in targets) or _strays_alive(strays) or job_cgroup.members(cgroup)
    ):
        time.sleep(0.05)
    for g in targets:
        _signal_group(g, signal.SIGKILL)
    _signal_strays(strays, signal.SIGKILL)
    job_cgroup.kill(cgroup)
    containers = data.get("containers") or {}
    if containers.get("names"):  # a container outlives its SIGKILLed `run` client
        rt = containers["runtime"]
        ContainerRuntime(Path(rt).name, rt, "").remove(list(containers["names"]))
    if (run_dir / PROCS_FILE).exists():
        write_procs_file(run_dir, {"procs": []})
    return targets


def mount_skip_reason(dest: str, src: str) -> str | None:
    """Why the local backend cannot provide this file mount (None: it links it)."""
    rel = dest[2:] if dest.startswith("~/") else dest
    if "://" in src:
        return "bucket URLs are not mounted locally"
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        return "destination outside the job's directory"
    if not Path(src).exists():
        return f"source {src} does not exist"
    return None


def link_file_mounts(request: ExecRequest, cwd: Path | None = None) -> tuple[list[str], list[str]]:
    """file_mounts on this machine: a local source is symlinked at its destination inside the
    job's working directory `cwd` (`~/x` and `x` both land in `<cwd>/x`). Absolute destinations
    (we do not write outside the run) and bucket URLs (s3://, gs://) are skipped and reported."""
    if cwd is None:
        cwd = request.workdir if request.workdir is not None and request.workdir.is_dir() else request.run_dir
    linked, skipped = [], []
    for dest, src in request.file_mounts.items():
        rel = dest[2:] if dest.startswith("~/") else dest
        if mount_skip_reason(dest, src) is not None:
            skipped.append(dest)
            continue
        target = cwd / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            target.symlink_to(Path(src).resolve())
        linked.append(dest)
    return linked, skipped


class RuntimeFailedExecution(Execution):
    """An attempt whose container runtime cannot start the image: it ends at once, no rank
    started, as a failure retrying cannot fix."""

    def __init__(self, request: ExecRequest, reason: str) -> None:
        self.request = request
        self.phase = "setup" if request.setup else "run"
        self._result = ExecResult(Outcome.FAILED, 125, self.phase, (), "container", reason, retryable=False)

    def poll(self) -> ExecResult:
        return self._result

    def wait(self, timeout_s: float | None = None) -> ExecResult:
        return self._result

    def stop(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> ExecResult:
        return self._result

    def notify_preemption(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> None:
        pass

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()

    @property
    def image_runtime(self) -> str:
        return "container"


class LocalExecution(Execution):
    def __init__(
        self,
        request: ExecRequest,
        *,
        runtime: ContainerRuntime | None,
        base_env: Mapping[str, str] | None,
        clock=time.monotonic,
        run_as: tuple[JobUser, str] | None = None,
    ) -> None:
        self.request = request
        self._runtime = runtime if request.image_id else None
        self.image_digest = self._runtime.digest if self._runtime is not None else None
        self._containers: list[str] = []  # names of the containers this attempt started
        self._run_as = run_as  # (user, setpriv): the job's command runs as that user (job_user.py)
        self._base_env = base_env
        self._clock = clock
        self._master_port = free_port()
        self._procs: dict[int, subprocess.Popen] = {}
        self._exits: dict[int, int] = {}  # rank -> exit code of the current phase
        self._result: ExecResult | None = None
        self._stop_reason: Outcome | None = None  # CANCELLED | PREEMPTED once asked
        self._kill_at: float | None = None
        self._failed_first: RankExit | None = None
        self._relays: list[subprocess.Popen] = []  # log relays of the current phase (secrets)
        self._strays: dict[int, int | None] = {}  # processes tied to the ranks, seen when stopping
        (request.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        record_attempt(request.run_dir, request.attempt, num_nodes=request.num_nodes, checkpoint_dir=request.checkpoint_dir)
        self._cgroup = job_cgroup.make_attempt_cgroup(request.run_id, request.attempt)
        if run_as is not None:
            self._cwd().mkdir(mode=0o700, exist_ok=True)
        self.mounts_linked, self.mounts_skipped = link_file_mounts(request, self._cwd())
        if run_as is not None:
            grant(run_as[0], home=paths.home(), run_dir=request.run_dir, owned=[p for p in (self._cwd(), request.checkpoint_dir) if p is not None])
        self.phase = "setup" if request.setup else "run"
        self._start_phase()

    # ---- phases -------------------------------------------------------------------------------
    def _start_phase(self) -> None:
        command = self.request.setup if self.phase == "setup" else self.request.run
        self._exits = {}
        self._procs = {}
        for rank in range(self.request.num_nodes):
            self._procs[rank] = self._spawn(rank, command or "true")
        self._write_procs()

    def _cwd(self) -> Path:
        req = self.request
        if req.workdir is not None and req.workdir.is_dir():
            return req.workdir
        return req.run_dir / JOB_DIR if self._run_as is not None else req.run_dir

    def _spawn(self, rank: int, command: str) -> subprocess.Popen:
        req = self.request
        env = rank_env(req, rank, phase=self.phase, master_port=self._master_port, base=self._base_env)
        cwd = self._cwd()
        if self._run_as is not None:
            user = self._run_as[0]
            env.update(USER=user.name, LOGNAME=user.name, HOME=user.home if os.path.isdir(user.home) else str(cwd))
        if self._runtime is not None:
            mounts = [p for p in (req.workdir, req.checkpoint_dir, req.run_dir) if p is not None]
            name = f"launcher-{req.run_id}-a{req.attempt}-r{rank}-{self.phase}"
            self._containers.append(name)
            argv = self._runtime.run_argv(command, name=name, env_names=container_env_names(env, req), workdir=req.workdir, mounts=mounts)
        else:
            argv = ["bash", "-c", command]
        if self._run_as is not None:
            argv = self._run_as[0].argv(argv, self._run_as[1])
        procs = self._cgroup / "cgroup.procs" if self._cgroup is not None else None
        argv = wrap_argv(argv, exit_file=exit_path(req.run_dir, req.attempt, self.phase, rank), cgroup_procs=procs)
        with job_output(log_path(req.run_dir, rank), req.secrets) as (out, relay):
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: we signal the whole tree
            )
        if relay is not None:
            self._relays.append(relay)
        return proc

    def _write_procs(self) -> None:
        procs = [
            {"rank": r, "pgid": p.pid, "start_ticks": process_start_ticks(p.pid), "phase": self.phase}
            for r, p in self._procs.items()
            if p.returncode is None
        ]
        data = {"run_id": self.request.run_id, "attempt": self.request.attempt, "procs": procs}
        if self._runtime is not None and self._containers:
            data["containers"] = {"runtime": self._runtime.path, "names": list(self._containers)}
        write_procs_file(self.request.run_dir, data)

    # ---- Execution ----------------------------------------------------------------------------
    @property
    def image_runtime(self) -> str:
        return self._runtime.name if self._runtime is not None else "host"

    @property
    def process_groups(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self._procs.values() if p.returncode is None)

    def poll(self) -> ExecResult | None:
        if self._result is not None:
            return self._result
        for rank, p in self._procs.items():
            if rank not in self._exits:
                rc = p.poll()
                if rc is not None:
                    self._exits[rank] = 128 - rc if rc < 0 else rc  # killed by signal N -> 128+N
                    if self._exits[rank] != 0 and self._failed_first is None:
                        self._failed_first = RankExit(rank, self.phase, self._exits[rank])
        if self._failed_first is not None and self._stop_reason is None and self._kill_at is None:
            # One rank failed: stop the others (a DDP peer would otherwise wait forever).
            self._terminate_all(DEFAULT_GRACE_SECONDS)
        if self._kill_at is not None and self._clock() >= self._kill_at:
            for p in self._procs.values():
                _signal_group(p.pid, signal.SIGKILL)
            _signal_strays(self._strays, signal.SIGKILL)
        if len(self._exits) < len(self._procs):
            return None
        for p in self._procs.values():  # leftovers (background children) die with their rank
            _signal_group(p.pid, signal.SIGKILL)
        _signal_strays(self._strays, signal.SIGKILL)
        job_cgroup.kill(self._cgroup, remove=False)  # ... wherever they went (setsid): the cgroup holds them
        _await_strays_gone(self._strays, STRAYS_GONE_S)
        wait_relays(self._relays, RELAY_DRAIN_S)  # the log is complete before the phase ends
        self._relays = []
        if self._runtime is not None and self._kill_at is not None:
            self._runtime.remove(self._containers)  # a SIGKILLed `run` client leaves its container running
        if self.phase == "setup" and self._failed_first is None and self._stop_reason is None:
            self.phase = "run"
            self._start_phase()
            return None
        self._result = self._make_result()
        if self._cgroup is not None:
            job_cgroup.remove_tree(self._cgroup)
            job_cgroup.remove_if_empty(self.request.run_id)
        self.phase = "done"
        self._write_procs()
        return self._result

    def _make_result(self) -> ExecResult:
        ranks = tuple(RankExit(r, self.phase, self._exits.get(r)) for r in sorted(self._procs))
        preempted_exit = any(x.exit_code == PREEMPTED_EXIT_CODE for x in ranks) and self.phase == "run"
        if self._stop_reason is Outcome.PREEMPTED or (preempted_exit and self._stop_reason is None):
            code = next((x.exit_code for x in ranks if x.exit_code), 0)
            return ExecResult(Outcome.PREEMPTED, code, self.phase, ranks, self.image_runtime)
        if self._stop_reason is Outcome.CANCELLED:
            code = next((x.exit_code for x in ranks if x.exit_code), 0)
            return ExecResult(Outcome.CANCELLED, code, self.phase, ranks, self.image_runtime)
        first = self._failed_first
        if first is not None:
            outcome = Outcome.SETUP_FAILED if first.phase == "setup" else Outcome.FAILED
            detail = f"rank {first.rank} {first.phase} exited with {first.exit_code}"
            why = RUNTIME_EXIT_CODES.get(first.exit_code or 0) if self._runtime is not None or first.exit_code != 125 else None
            if why:
                detail += f" ({why}: {last_log_line(log_path(self.request.run_dir, first.rank))})"
            return ExecResult(outcome, first.exit_code, first.phase, ranks, self.image_runtime, detail)
        return ExecResult(Outcome.SUCCEEDED, 0, self.phase, ranks, self.image_runtime)

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        deadline = None if timeout_s is None else self._clock() + timeout_s
        while True:
            result = self.poll()
            if result is not None or (deadline is not None and self._clock() >= deadline):
                return result
            self._sleep_until_an_exit(0.02)

    def _sleep_until_an_exit(self, seconds: float) -> None:
        """Sleep up to `seconds`, woken as soon as a running rank exits (a pidfd per rank, Linux
        5.3+): a short job's end is seen when it happens, not at the next tick."""
        fds: list[int] = []
        try:
            for p in self._procs.values():
                if p.returncode is None:
                    fds.append(os.pidfd_open(p.pid))
            if fds:
                select.select(fds, [], [], seconds)
                return
        except (AttributeError, OSError):  # no pidfds here: a plain tick
            pass
        finally:
            for fd in fds:
                os.close(fd)
        time.sleep(seconds)

    def _terminate_all(self, grace_s: float) -> None:
        # Without a cgroup, a process that left its rank's group is found now, while its parent lives.
        groups = {p.pid for p in self._procs.values() if p.returncode is None}
        self._strays |= session_and_descendants(groups)
        for g in groups:
            _signal_group(g, signal.SIGTERM)
        # One SIGTERM per process: a job's handler (save a checkpoint, exit 75) must not run twice.
        outside = {pid: t for pid, t in self._strays.items() if process_group(pid) not in groups}
        _signal_strays(outside, signal.SIGTERM)
        job_cgroup.terminate(self._cgroup, already=lambda pid: process_group(pid) in groups or pid in outside)
        if self._kill_at is None:
            self._kill_at = self._clock() + grace_s

    def notify_preemption(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> None:
        if self._result is None and self._stop_reason is None:
            self._stop_reason = Outcome.PREEMPTED
            self._terminate_all(grace_s)

    def stop(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> ExecResult:
        if self._result is None:
            if self._stop_reason is None:
                self._stop_reason = Outcome.CANCELLED
            self._terminate_all(grace_s)
        result = self.wait(grace_s + 10.0)
        if result is None:  # SIGKILL was sent; the kernel reaps shortly
            result = self.wait(None)
        return result


def last_log_line(path: Path, limit: int = 8192) -> str:
    """The last non-empty line of a rank's log (the runtime's own error, usually)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"


class LocalExecutor(Executor):
    name = "local"

    def __init__(
        self,
        *,
        podman: str | None | bool = True,
        runtimes: Sequence[str] | None = None,
        base_env: Mapping[str, str] | None = None,
        run_as: tuple[JobUser, str] | None = None,
    ) -> None:
        """podman=True: run images with the first of `runtimes` (default podman, docker) that can
        start them here; a string: only that runtime binary; False/None: always on the host.
        run_as: (user, setpriv binary) from job_user.resolve_job_user: jobs run as that user, on
        the host (a task with an image is refused: containers as another user are not built yet)."""
        if podman is False or podman is None:
            self.runtimes: tuple[str, ...] | None = None
        elif isinstance(podman, str):
            self.runtimes = (podman,)
        else:
            self.runtimes = tuple(runtimes) if runtimes is not None else None
        self.use_containers = podman not in (False, None)
        self.base_env = base_env
        self.run_as = run_as
        self._selected: dict[str, ContainerRuntime | None | str] = {}  # image -> runtime, None (none installed), or why not

    def runtime_for(self, image: str) -> ContainerRuntime | None:
        """The runtime for `image`, probed once per executor. Raises ContainerRuntimeError."""
        if image not in self._selected:
            try:
                self._selected[image] = select_runtime(image, candidates=self.runtimes)
            except ContainerRuntimeError as e:
                self._selected[image] = e.message
        got = self._selected[image]
        if isinstance(got, str):
            raise ContainerRuntimeError(got)
        return got

    def start(self, request: ExecRequest, handle: ClusterHandle) -> Execution:
        runtime = None
        if request.image_id and self.run_as is not None:
            return RuntimeFailedExecution(request, "this server runs local jobs as another user (--local-jobs-user), without containers: the task's image_id cannot run here")
        if request.image_id and self.use_containers:
            try:
                runtime = self.runtime_for(request.image_id)
            except ContainerRuntimeError as e:
                return RuntimeFailedExecution(request, e.message)
        return LocalExecution(request, runtime=runtime, base_env=self.base_env, run_as=self.run_as)
