"""The executor interface: run a task's setup and run commands on a provisioned cluster.

An executor starts an `Execution` and returns at once; the controller polls it, asks it to stop
(cancel) or to deliver a preemption notice, and reads an `ExecResult` that says which phase
ended the job and why. The controller never guesses from a bare exit code:

* `PREEMPTED_EXIT_CODE` (75, BSD's EX_TEMPFAIL: "temporary failure, try again") is what a job
  exits with after it saw a preemption notice and saved its checkpoint (`launcher.checkpoint`
  uses this constant). It is deliberately not 143 (128+SIGTERM), which is also what a job
  killed by a plain SIGTERM reports, so "checkpointed and left" and "was killed" stay distinct.
* An execution that was told about a preemption (`notify_preemption`) ends as PREEMPTED
  whatever its exit code: the machine is going away either way.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from launcher.providers.base import ClusterHandle

# A job that received a preemption notice, saved its checkpoint and exited on purpose.
PREEMPTED_EXIT_CODE = 75

# Default time between SIGTERM and SIGKILL when stopping a job.
DEFAULT_GRACE_SECONDS = 10.0


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    SETUP_FAILED = "setup_failed"  # `setup` exited non-zero on some rank; `run` never started
    FAILED = "failed"  # `run` exited non-zero on some rank
    PREEMPTED = "preempted"  # notice delivered, or the job exited with PREEMPTED_EXIT_CODE
    NODE_LOST = "node_lost"  # a rank vanished without an exit status
    CANCELLED = "cancelled"  # stopped on request (`launcher down`)
    NO_CAPACITY = "no_capacity"  # the cluster had no room for the job within the bound; nothing ran


@dataclass(frozen=True)
class ExecRequest:
    """Everything an executor needs to run one attempt of a task."""

    run_id: str
    attempt: int  # 1-based attempt number (LAUNCHER_ATTEMPT)
    run_dir: Path  # $LAUNCHER_HOME/runs/<run-id>
    workdir: Path | None  # the user's workdir (already resolved), or None
    setup: str | None
    run: str | None
    num_nodes: int
    gpus_per_node: int
    envs: Mapping[str, str] = field(default_factory=dict)  # task envs + secrets
    checkpoint_dir: Path | None = None
    image_id: str | None = None
    file_mounts: Mapping[str, str] = field(default_factory=dict)
    task_id: str | None = None  # SKYPILOT_TASK_ID; defaults to a value derived from run/attempt
    secrets: tuple[str, ...] = ()  # values of the spec's `secrets:` (also in envs): kept out of stored logs
    max_queue_s: float | None = None  # longest the job may wait queued for room on the cluster (None: the backend's own bound)


@dataclass(frozen=True)
class RankExit:
    rank: int
    phase: str  # "setup" | "run"
    exit_code: int | None  # None: no status (process vanished)


@dataclass(frozen=True)
class ExecResult:
    outcome: Outcome
    exit_code: int | None  # the first failing rank's code (0 when all succeeded)
    phase: str  # the phase that ended the job: "setup" | "run"
    ranks: tuple[RankExit, ...] = ()
    image_runtime: str = "host"  # "host" | "podman" | "docker" ("container": none could start)
    detail: str = ""
    # False: retrying cannot help (the container runtime could not start the image); the
    # controller ends the run instead of counting it against `max_restarts`
    retryable: bool = True

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.SUCCEEDED


class Execution(abc.ABC):
    """A running attempt. All methods are safe to call from the controller's single thread."""

    @abc.abstractmethod
    def poll(self) -> ExecResult | None:
        """The result once every rank has ended; None while it runs."""

    @abc.abstractmethod
    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        """Block until done (or timeout); returns poll()."""

    @abc.abstractmethod
    def stop(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> ExecResult:
        """Cancel: SIGTERM every rank's process group, SIGKILL after grace_s; wait for the end."""

    @abc.abstractmethod
    def notify_preemption(self, grace_s: float = DEFAULT_GRACE_SECONDS) -> None:
        """Deliver a preemption notice (SIGTERM); the result will be PREEMPTED. Non-blocking:
        the job gets grace_s to checkpoint before it is killed."""

    @property
    @abc.abstractmethod
    def process_groups(self) -> tuple[int, ...]:
        """Process group ids of the running ranks (for crash cleanup)."""

    @property
    def image_runtime(self) -> str:
        return "host"

    # The phase running now; "run" once the job itself runs (earlier phases: "setup", "deploy", ...).
    phase: str = "run"
    # What the attempt waits for before its job can start (e.g. a Slurm job queued behind
    # others), in words; None while it waits for nothing. The controller shows changes.
    waiting_for: str | None = None
    # File mounts this backend could not provide (the controller records them).
    mounts_skipped: tuple[str, ...] | list[str] = ()
    # The content digest (sha256:...) of the container image the job runs in, where known.
    image_digest: str | None = None


class Executor(abc.ABC):
    name: str = "base"

    @abc.abstractmethod
    def start(self, request: ExecRequest, handle: ClusterHandle) -> Execution: ...

    def release(self, handle: ClusterHandle) -> None:
        """Forget the cluster on the executor's side before the provider tears it down (SkyPilot
        keeps a record of each cluster). Nothing to do by default."""
