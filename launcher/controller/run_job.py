"""What a controller runs and what it is given: the run's job (spec, plan, directories), the
injected dependencies (ledger, providers, executors, policies, clock) and its result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from launcher.controller.observer import RunObserver
from launcher.controller.placement_history import HISTORY_DAYS
from launcher.executors.base import DEFAULT_GRACE_SECONDS, Executor
from launcher.ledger.interfaces import LedgerReader, LedgerWriter
from launcher.planning.plan import Plan
from launcher.policies.base import PlacementPolicy, RecoveryPolicy
from launcher.providers.base import Provider
from launcher.spec.models import TaskSpec


@dataclass(frozen=True)
class RunJob:
    """What the controller runs: one run's spec, plan and directories."""

    run_id: str
    run_dir: Path
    spec: TaskSpec
    plan: Plan
    workdir: Path | None
    checkpoint_dir: Path
    tags: dict[str, str] = field(default_factory=dict)
    grace_s: float = DEFAULT_GRACE_SECONDS
    file_mounts: dict[str, str] = field(default_factory=dict)  # dest -> source (local paths resolved)
    ssh_allowed_cidr: str | None = None  # clouds: the network allowed to SSH into the cluster


@dataclass
class ControllerDeps:
    ledger: LedgerWriter
    provider_for: Callable[[str], Provider]
    executor_for: Callable[[str], Executor]
    policy: RecoveryPolicy
    notify: Callable[[str], None] = lambda msg: None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_interval_s: float = 0.05
    heartbeat_interval_s: float = 1.0
    max_recoveries: int = 100  # hard stop against a policy that loops forever
    capacity_retry_s: float = 5.0  # wait before asking the same offer again after a failed provision
    notice_interval_s: float = 5.0  # how often to ask a provider for preemption notices (an API call
    # on clouds); a provider may say otherwise with a `notice_poll_s` attribute (local: every poll)
    max_wait_s: float = 6 * 3600.0  # longest a policy may keep us waiting in total
    # (ledger, run_id) -> why the run must stop for budget, or None (polled with heartbeats)
    budget_stop: Callable[[object, str], str | None] | None = None
    restart_overhead_hours: float = 5.0 / 60
    placement_history_days: float = HISTORY_DAYS  # other runs' spot attempts the placement policy starts from (0: none)
    # How often to look for new checkpoints in the job's store (a listing; remote stores cost calls).
    checkpoint_poll_s: float = 1.0
    checkpoint_poll_remote_s: float = 30.0
    # Job progress (new log output) becomes the cluster's heartbeat: the reaper's sign that the
    # job, not just its controller, is alive. A stalled job stops beating.
    progress_poll_s: float = 30.0
    # Placement policy asked at every tick-equivalent (controller/placement.py): None = only the
    # recovery policy, when nothing is held. `placement_gap_hours` > 0: decide in whole ticks.
    placement_policy: PlacementPolicy | None = None
    placement_tick_s: float = 60.0
    max_probe_s: float = 16 * 60.0  # longest between launches that look for spot capacity a cloud cannot report
    placement_gap_hours: float = 0.0
    # Told when this controller takes the run and lets go of it (`run_started()`,
    # `run_ended(state)`), e.g. the experiment tracker following the job's output.
    observer: RunObserver | None = None


def default_budget_stop(ledger: LedgerReader, run_id: str) -> str | None:
    """budgets.should_stop: the run's budget_usd and budgets.yaml hard limits."""
    from launcher.planning.budget import should_stop

    return should_stop(ledger, run_id, datetime.now(UTC))


@dataclass(frozen=True)
class RunResult:
    run_id: str
    state: str
    end_reason: str | None
    exit_code: int | None
    attempts: int
