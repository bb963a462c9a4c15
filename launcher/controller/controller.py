"""The controller: drives one run through attempts (provision -> execute -> watch -> recover).

Provider, executor, recovery policy, ledger and clock are injected, so the same loop drives the
local backend, the clouds and the tests' fakes. Rules:

* Each state change is compare-and-set in the ledger *before* it takes effect. If another
  process moved the run (e.g. `launcher down` wrote STOPPING) the controller stops.
* One attempt row per placement, opened before provisioning, closed with its end reason.
* User-code failures are retried on the same offer up to `max_restarts`; a setup failure is
  not retried (it is nearly always deterministic); preemptions and node losses are recovered
  where the recovery policy says, without counting against `max_restarts`.
* Policies see the real situation (`_decision_state`): spot capacity from providers that know it
  (the optional `spot_available(offer, now)`; unknown counts as available), the run's age and
  the attempts' running time on the injected clock, the deadline. A wait ends early when spot
  capacity comes back.
* Per attempt the ledger also gets the job's new checkpoints as seen in its store
  (`checkpoint` events) and, on a replacement attempt, when the job ran again with the restart
  overhead paid (`recovery` event with `restart_overhead_seconds`): the cost report's inputs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from dataclasses import dataclass, field
from pathlib import Path

from infra.tags import cluster_tags
from launcher.controller.billing_account import with_billing_account
from launcher.controller.checkpoint_watch import CheckpointWatch
from launcher.controller.disk_space import SpaceReserve, as_disk_full, log_space_error
from launcher.controller.liveness import CONTROLLER_EVENT, ControllerInfo, this_controller
from launcher.controller.states import can_transition, is_terminal
from launcher.errors import BadInputError, ConflictError, CredentialsError, DiskFullError, LauncherError, ToolMissingError
from launcher.executors.base import DEFAULT_GRACE_SECONDS, ExecRequest, ExecResult, Executor, Outcome
from launcher.executors.job_status import RECORDABLE, EndedJob, record_outcome
from launcher.ledger.interfaces import LedgerReader, LedgerWriter
from launcher.ledger.records import (
    AttemptState,
    ClusterRecord,
    ClusterState,
    EndReason,
    EventKind,
    NewAttempt,
    RunState,
)
from launcher.planning.plan import Plan
from launcher.controller.observer import RunObserver
from launcher.controller.placement import PLACEMENT_EVENT, PlacementDriver, estimated_total_hours
from launcher.controller.placement_history import HISTORY_DAYS, read_history
from launcher.controller.placement_scores import ask_scores
from launcher.controller.recovery import unretryable
from launcher.policies.base import Choice, DecisionState, PlacementPolicy, RecoveryContext, RecoveryPolicy
from launcher.providers.base import ClusterHandle, ClusterRequest, PreemptionNotices, Provider, SpotCapacity
from launcher.spec.models import TaskSpec
from pricing.models import Offer, ScoredOffer

SPACE_POLL_S = 1.0  # how often a running attempt checks there is room for its logs


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


class _Stopped(Exception):
    """Someone else moved the run to STOPPING/terminal, or cancel was requested."""


@dataclass
class _AttemptEnd:
    reason: str  # EndReason
    exit_code: int | None = None
    offer: ScoredOffer | None = None
    detail: str = ""
    attempt_id: str | None = None  # still open: closed together with the run's next state
    ended_at: datetime | None = None
    unretryable: str | None = None  # why retrying cannot help (launcher.controller.recovery.unretryable)
    queued_s: float = 0.0  # time the attempt's job waited queued for room on the cluster (counts as waiting)


class Controller:
    def __init__(self, job: RunJob, deps: ControllerDeps, *, mode: str = "foreground") -> None:
        self.job = job
        self.d = deps
        self.led = deps.ledger
        self.mode = mode
        self._cancel = threading.Event()
        self._state = RunState.PENDING
        self._last_beat = float("-inf")
        self._unusable_clouds: set[str] = set()  # provider cannot work at all (tool/credentials missing)
        self._reserve = SpaceReserve(job.run_dir)
        # Time as the policies see it: the run's age when this controller started (wall clock,
        # from the ledger) plus time since on the injected clock, so tests can drive it.
        self._started_clock = deps.clock()
        self._age_at_start_s = 0.0
        self._prior_work_s = 0.0  # running time of attempts made before this controller started
        self._work_s = 0.0  # `run`-phase time of this controller's attempts (injected clock)
        self._ckpt_watch: CheckpointWatch | None = None
        self._placement = self._placement_driver()
        self._capacity_errors: dict = {}  # offer -> clock of its last failed provision
        self._moving = False  # the placement policy asked the running job to stop
        self._move_to: ScoredOffer | None = None  # ... and this offer next (None: hold nothing for a tick)

    # ---- public -------------------------------------------------------------------------------
    def request_cancel(self) -> None:
        """Safe from a signal handler or another thread."""
        self._cancel.set()

    def run(self) -> RunResult:
        run = self.led.get_run(self.job.run_id)
        self._state = run.state
        if is_terminal(run.state):
            return self._result()
        self._start_clocks(run)
        info: ControllerInfo = this_controller(self.mode)
        self.led.add_event(self.job.run_id, CONTROLLER_EVENT, info.__dict__)
        self._beat(force=True)
        if self.d.observer is not None:
            self.d.observer.run_started()
        try:
            if self._state == RunState.STOPPING:
                raise _Stopped
            previous = self._resume_point()
            if not is_terminal(self._state):
                self._loop(previous)
        except _Stopped:
            self._finish_stopping()
        except BaseException as e:
            full = as_disk_full(e, self.job.run_dir)
            if full is not None and self._end_for_disk_full(full):
                raise DiskFullError(
                    f"{full.message}; run {self.job.run_id} was ended (failed: disk_full) with its attempt closed",
                    hint="free space on that filesystem, then launch again (a checkpoint it saved is kept)",
                ) from e
            # The run stays live with a dead controller: `status` shows it orphaned, and
            # `down` / `launch --resume` take it from here. Say why in the ledger.
            try:
                self.led.add_event(self.job.run_id, "controller_error", {"error": f"{type(e).__name__}: {e}"})
            except Exception:
                pass
            raise
        finally:
            self._reserve.release()
            if self.d.observer is not None:
                self._tell_observer_ended()
        return self._result()

    def _tell_observer_ended(self) -> None:
        try:
            self.d.observer.run_ended(self._state)
        except Exception as e:  # tracking never fails a run
            self.led.add_event(self.job.run_id, "observer_error", {"error": f"{type(e).__name__}: {e}"})

    # ---- the attempt loop ---------------------------------------------------------------------
    def _resume_point(self) -> ScoredOffer | None:
        """On a fresh run: None. On resume: close what the dead controller left open."""
        attempts = self.led.attempts(self.job.run_id)
        if self._state == RunState.PENDING and not attempts:
            return None
        from launcher.controller.cleanup import abandon_open_attempts

        # Closing the attempts and settling the run are two changes with processes killed and
        # clusters terminated between them; a failed write in between is safe to resume again:
        # _settle_resumed reads the closed attempts.
        abandon_open_attempts(self.led, self.job.run_id, self.job.run_dir, self.d.provider_for, reason=EndReason.ABANDONED,
                              release_for=self._release_for)  # fmt: skip
        if self._settle_resumed():
            return None
        self._transition(RunState.RECOVERING, reason="resumed", data={"resumed_by": self.mode})
        last = attempts[-1] if attempts else None
        return self._scored_for(last) if last else None

    def _settle_resumed(self) -> bool:
        """The job ended on its own while no controller watched: a completed job ends the run,
        a setup failure or a failure past max_restarts fails it. True when the run ended."""
        attempts = self.led.attempts(self.job.run_id)
        last = attempts[-1] if attempts else None
        if last is None:
            return False
        if last.end_reason == EndReason.COMPLETED and can_transition(self._state, RunState.SUCCEEDED):
            self._transition(RunState.SUCCEEDED, reason=EndReason.COMPLETED)
            return True
        failures = sum(1 for a in attempts if a.end_reason == EndReason.FAILED)
        give_up = last.end_reason == EndReason.SETUP_FAILED or (
            last.end_reason == EndReason.FAILED and failures > self.job.spec.launcher.max_restarts
        )
        if give_up and can_transition(self._state, RunState.FAILED):
            self._fail(last.end_reason, f"the job exited with {last.exit_code} while no controller watched", exit_code=last.exit_code)
            return True
        return False

    def _loop(self, previous: ScoredOffer | None) -> None:
        attempts = self.led.attempts(self.job.run_id)
        failures = sum(1 for a in attempts if a.end_reason == EndReason.FAILED)
        tried = [s for s in (self._scored_for(a) for a in attempts) if s is not None]
        preempted_regions = [a.region for a in attempts if a.end_reason in (EndReason.PREEMPTED, EndReason.NODE_LOST)]
        retry_same: ScoredOffer | None = None
        waited_s = 0.0
        recoveries = 0
        last_failed: ScoredOffer | None = None  # offer whose provision just failed
        last_detail = ""  # ... and why
        while True:
            if recoveries > self.d.max_recoveries:
                break
            self._check_cancel()
            if retry_same is not None:
                offer, why = retry_same, f"restart after failure {failures}/{self.job.spec.launcher.max_restarts}"
            elif self._moving:
                self._moving = False
                offer, why, self._move_to = self._move_to, "placement policy: move", None
                if offer is None:  # stop holding: the next decision is a tick later
                    waited_s += self._sleep_watchful(self.d.placement_tick_s)
                    continue
            elif self._placement is not None:
                offer = self._place_next(len(preempted_regions))
                if offer is None:
                    if waited_s + self.d.placement_tick_s > self.d.max_wait_s:
                        self._fail(EndReason.PROVISION_FAILED, "placement policy kept waiting; giving up")
                        return
                    cap = self._placement.capacity()
                    waited_s += self._sleep_watchful(self.d.placement_tick_s, wake=lambda: self._placement.capacity() != cap)
                    continue
                why = f"placement policy: {self._placement.log[-1].reason}"
            elif previous is None and self._state == RunState.PENDING:
                offer, why = self.job.plan.chosen.scored, "chosen in the plan"
            else:
                decision = self.d.policy.choose(
                    RecoveryContext(
                        ranked=tuple(s for s in self.job.plan.ranked if s.offer.cloud not in self._unusable_clouds),
                        previous=previous,
                        preempted_regions=tuple(preempted_regions),
                        state=self._decision_state(previous, len(preempted_regions)),
                        attempt=len(tried) + 1,
                        tried=tuple(tried),
                    )
                )
                if decision.offer is None:
                    if self.job.plan.ranked and all(s.offer.cloud in self._unusable_clouds for s in self.job.plan.ranked):
                        # Every offer's cloud failed as a whole (tool, credentials, settings): no wait can help.
                        self._fail(EndReason.PROVISION_FAILED, "no usable offer left: " + ", ".join(sorted(self._unusable_clouds)) + " cannot be used (see the provision events)")
                        return
                    wait = max(decision.wait_seconds, self.d.poll_interval_s)
                    if waited_s + wait > self.d.max_wait_s:
                        self._fail(EndReason.PROVISION_FAILED, "recovery policy kept waiting; giving up")
                        return
                    self.led.add_event(self.job.run_id, EventKind.RECOVERY, {"decision": "wait", "seconds": wait, "reason": decision.reason})
                    self.d.notify(_wait_line(decision.reason, wait, self.d.max_wait_s - waited_s))
                    # Ask again early when spot capacity comes back (a provider that knows says so).
                    had_spot = self._spot_capacity()
                    slept = self._sleep_watchful(wait, wake=None if had_spot else self._spot_capacity)
                    waited_s += slept
                    continue
                offer, why = decision.offer, decision.reason or self.d.policy.name
                if last_failed is not None and offer.offer == last_failed.offer:
                    # The same offer just had no capacity: give it a moment (bounded in total).
                    if waited_s + self.d.capacity_retry_s > self.d.max_wait_s:
                        self._fail(EndReason.PROVISION_FAILED, f"no capacity on any offer; giving up after {waited_s:.0f}s of waiting "
                                   f"(launcher: max_wait {self.d.max_wait_s:.0f}s): {last_detail}")  # fmt: skip
                        return
                    self._sleep_watchful(self.d.capacity_retry_s)
                    waited_s += self.d.capacity_retry_s
                if previous is not None:
                    self.led.add_event(self.job.run_id, EventKind.RECOVERY, {"policy": self.d.policy.name, "offer": _offer_dict(offer), "reason": why})
            retry_same = None
            end = self._attempt(offer, why)
            tried.append(offer)
            previous = offer
            last_failed = offer if end.reason == EndReason.PROVISION_FAILED else None
            last_detail = end.detail
            waited_s += end.queued_s
            if end.reason != EndReason.PROVISION_FAILED:
                recoveries += 1
            if end.reason == EndReason.COMPLETED:
                self._transition(RunState.SUCCEEDED, reason=EndReason.COMPLETED, ending=end)
                return
            if end.reason == EndReason.SETUP_FAILED:
                self._fail(EndReason.SETUP_FAILED, end.detail, exit_code=end.exit_code, ending=end)
                return
            if end.reason == EndReason.FAILED and end.unretryable:  # not the job's failure: no restart, not counted
                self._fail(EndReason.FAILED, f"not retried: {end.unretryable}", exit_code=end.exit_code, ending=end)
                return
            if end.reason == EndReason.FAILED:
                failures += 1
                if failures > self.job.spec.launcher.max_restarts:
                    self._fail(EndReason.FAILED, end.detail, exit_code=end.exit_code, ending=end)
                    return
                self._transition(RunState.RECOVERING, reason="restart after failure", data={"exit_code": end.exit_code}, ending=end)
                retry_same = offer
                continue
            if end.reason in (EndReason.PREEMPTED, EndReason.NODE_LOST):
                preempted_regions.append(offer.offer.region)
                self._transition(RunState.RECOVERING, reason=end.reason, ending=end)
                continue
            if end.reason == EndReason.PROVISION_FAILED:
                self._transition(RunState.RECOVERING, reason="provision failed", data={"error": end.detail}, ending=end)
                self._capacity_errors[offer.offer] = self.d.clock()
                if self._placement is not None:  # the policy would ask for the same offer at once
                    if waited_s + self.d.capacity_retry_s > self.d.max_wait_s:
                        self._fail(EndReason.PROVISION_FAILED, "no capacity for the placement policy's choices; giving up")
                        return
                    waited_s += self._sleep_watchful(self.d.capacity_retry_s)
                continue
            if end.reason == EndReason.MOVED:
                self._transition(RunState.RECOVERING, reason=EndReason.MOVED, ending=end)
                continue
            self._end_attempt(end)
            raise _Stopped  # CANCELLED / BUDGET_STOP: the run is STOPPING already
        self._fail(EndReason.FAILED, f"gave up after {self.d.max_recoveries} recoveries")

    def _attempt(self, scored: ScoredOffer, why: str) -> _AttemptEnd:
        """Provision, run and tear down one attempt. A job that ended on its own comes back with
        its attempt still open: the caller closes it together with the run's next state."""
        job, spec, offer = self.job, self.job.spec, scored.offer
        started = self.d.clock()
        before = self.led.attempts(job.run_id)
        seq = len(before) + 1
        replaces = any(a.end_reason != EndReason.PROVISION_FAILED for a in before)  # a job ran before
        cluster = f"{job.run_id}-c{seq}"
        provider = self.d.provider_for(offer.cloud)
        # The account is asked of the cloud before the transaction below: no cloud call inside it.
        new = with_billing_account(NewAttempt.from_offer(offer, num_nodes=spec.num_nodes, cluster=cluster), provider)
        tags = cluster_tags(job.tags, cluster=cluster, run_id=job.run_id)
        with self._together():  # the run provisions this attempt on this cluster: one change
            self._transition(RunState.PROVISIONING, data={"offer": _offer_dict(scored), "why": why})
            attempt = self.led.add_attempt(job.run_id, new)
            self.led.upsert_cluster(
                ClusterRecord(
                    name=cluster, provider=offer.cloud, region=offer.region, zone=offer.zone,
                    state=ClusterState.PROVISIONING, run_id=job.run_id, project=spec.launcher.project, tags=tags,
                )
            )  # fmt: skip
        self.d.notify(f"attempt {seq}: provisioning {offer.cloud}/{offer.region} {offer.instance_type}")
        request = ClusterRequest(
            cluster=cluster, offer=offer, num_nodes=spec.num_nodes, tags=tags,
            image_id=spec.resources.image, disk_size_gib=spec.resources.disk_size,
            ssh_allowed_cidr=job.ssh_allowed_cidr,
        )  # fmt: skip
        try:
            handle = provider.provision(request)
        except LauncherError as e:
            # Missing tool, credentials or configuration fail every offer of that cloud alike.
            whole_cloud = isinstance(e, ToolMissingError | CredentialsError | BadInputError)
            self.led.add_event(
                job.run_id, EventKind.PROVISION, {"ok": False, "error": str(e), "cloud_unusable": whole_cloud},
                attempt_id=attempt.attempt_id,
            )  # fmt: skip
            ended_at = self.led.now()
            self._teardown(provider, None, cluster, attempt.attempt_id)
            if whole_cloud:
                self._unusable_clouds.add(offer.cloud)
                self.d.notify(f"{offer.cloud}: {e}; skipping its offers")
            return _AttemptEnd(EndReason.PROVISION_FAILED, detail=str(e), offer=scored, attempt_id=attempt.attempt_id, ended_at=ended_at)
        try:
            with self._together():  # the cluster is up and the run runs this attempt: one change, before the job starts
                self.led.upsert_cluster(
                    ClusterRecord(
                        name=cluster, provider=offer.cloud, region=handle.region, zone=handle.zone, stack=handle.stack,
                        state=ClusterState.UP, run_id=job.run_id, project=spec.launcher.project,
                        nodes=[{"instance_id": n.instance_id, "ip": n.ip, "rank": n.rank} for n in handle.nodes],
                    )
                )  # fmt: skip
                self.led.add_event(job.run_id, EventKind.PROVISION, {"ok": True, "cluster": cluster, "nodes": len(handle.nodes)}, attempt_id=attempt.attempt_id)
                self._transition(RunState.RUNNING, data={"attempt": seq})
                self.led.set_attempt_state(attempt.attempt_id, AttemptState.SETUP if spec.setup else AttemptState.RUNNING)
        except _Stopped:
            self.led.end_attempt(attempt.attempt_id, EndReason.CANCELLED)
            self._teardown(provider, handle, cluster, attempt.attempt_id)
            raise
        request = ExecRequest(
            run_id=job.run_id, attempt=seq, run_dir=job.run_dir, workdir=job.workdir, setup=spec.setup,
            run=spec.run, num_nodes=spec.num_nodes, gpus_per_node=offer.accelerator_count,
            envs=spec.env_strings(), checkpoint_dir=job.checkpoint_dir, image_id=spec.resources.image_for(offer.region),
            file_mounts=job.file_mounts, secrets=spec.secret_values(), max_queue_s=spec.launcher.max_wait_seconds,
        )  # fmt: skip
        executor = self.d.executor_for(offer.cloud)
        watch = self._checkpoint_watch()
        self._reserve.take()  # room to end the run cleanly if the job fills the disk
        execution = executor.start(request, handle)
        skipped = list(execution.mounts_skipped)
        if skipped:
            self.led.add_event(job.run_id, "file_mounts", {"skipped": skipped, "why": "not available on this backend"}, attempt_id=attempt.attempt_id)
        if request.image_id:
            image = {"image": request.image_id, "image_runtime": execution.image_runtime}
            if execution.image_digest:
                image["image_digest"] = execution.image_digest
            self.led.add_event(job.run_id, "image", image, attempt_id=attempt.attempt_id)
        result, stop_reason = self._watch(
            execution, provider, handle, attempt.attempt_id, watch, recovered_from=started if replaces else None,
            held=scored, attempt_started=started,
        )
        reason = _end_reason(result, stop_reason)
        if self._moving and reason == EndReason.PREEMPTED and stop_reason is None:
            reason = EndReason.MOVED  # we asked it to stop: the job checkpointed and exited
        ended_at = self.led.now()
        if stop_reason is not None:  # the run is STOPPING already: the attempt's end is the whole change
            self.led.end_attempt(attempt.attempt_id, reason, exit_code=result.exit_code, ended_at=ended_at)
        elif reason != EndReason.MOVED and result.outcome in RECORDABLE:
            # for whoever cleans up if this process dies during the teardown (minutes on a cloud)
            record_outcome(job.run_dir, seq, EndedJob(result.outcome, result.exit_code or 0, result.detail, ended_at.timestamp()))
        # Otherwise the attempt stays open through the teardown (an action: no transaction spans
        # it) and closes together with the run's next state, so a failed write never leaves a
        # live run whose attempt ended; billing still ends when the job did.
        self._teardown(provider, handle, cluster, attempt.attempt_id, executor=executor)
        self._reserve.release()
        self.d.notify(f"attempt {seq}: {reason}" + (f" (exit {result.exit_code})" if result.exit_code else "")
                      + (f": {result.detail}" if result.outcome is Outcome.NO_CAPACITY else ""))  # fmt: skip
        if stop_reason is not None:
            raise _Stopped
        queued = self.d.clock() - started if result.outcome is Outcome.NO_CAPACITY else 0.0
        return _AttemptEnd(reason, result.exit_code, scored, result.detail, attempt.attempt_id, ended_at, unretryable(result), queued_s=queued)

    def _watch(self, execution, provider, handle: ClusterHandle, attempt_id: str, watch: CheckpointWatch,
               *, recovered_from: float | None, held: ScoredOffer | None = None,
               attempt_started: float | None = None):  # fmt: skip
        """Poll until the job ends; deliver preemption notices; record new checkpoints; honor
        stop requests. `recovered_from`: when this attempt replaces an earlier one, the clock at
        its start (the restart overhead runs from there until the job runs again)."""
        noticed = False
        notice_every = provider.notice_poll_s
        if notice_every is None:  # the provider has no pace of its own
            notice_every = self.d.notice_interval_s
        next_notice = float("-inf")
        ckpt_every = self.d.checkpoint_poll_remote_s if watch.remote else self.d.checkpoint_poll_s
        next_ckpt = self.d.clock() + ckpt_every
        phase = execution.phase
        run_started = None  # notices and work count from `run`
        stop_reason: str | None = None
        notice_source = provider.preemption_notice if isinstance(provider, PreemptionNotices) else None
        if phase == "run":
            run_started = self._running_again(attempt_id, recovered_from)
        next_progress, log_bytes = self.d.clock() + self.d.progress_poll_s, self._log_bytes()
        next_tick = (attempt_started if attempt_started is not None else self.d.clock()) + self.d.placement_tick_s
        capacity = self._placement.capacity() if self._placement is not None else ()
        waiting_for = None
        next_space = self.d.clock()
        while True:
            result: ExecResult | None = execution.wait(self.d.poll_interval_s)
            if getattr(execution, "waiting_for", None) != waiting_for:  # e.g. a Slurm job queued behind others
                waiting_for = execution.waiting_for
                if waiting_for:
                    self.led.add_event(self.job.run_id, "waiting", {"for": waiting_for}, attempt_id=attempt_id)
                    self.d.notify(f"waiting: {waiting_for}; gives up after {self.d.max_wait_s / 60:.0f} min queued (launcher: max_wait); Ctrl-C cancels")
            if self.d.clock() >= next_space:  # a log that cannot be written ends the run (disk_space.py)
                next_space = self.d.clock() + SPACE_POLL_S
                full = log_space_error(self.job.run_dir)
                if full is not None:
                    raise full
            if result is not None:
                if run_started is not None:
                    self._work_s += max(0.0, self.d.clock() - run_started)
                self._record_checkpoint(watch, attempt_id)  # e.g. the save on a preemption notice
                return result, stop_reason
            new_phase = execution.phase
            if new_phase != phase and new_phase == "run":
                self.led.set_attempt_state(attempt_id, AttemptState.RUNNING)
                run_started = self._running_again(attempt_id, recovered_from)
            phase = new_phase
            if self.d.clock() >= next_ckpt:
                next_ckpt = self.d.clock() + ckpt_every
                self._record_checkpoint(watch, attempt_id)
            if self.d.clock() >= next_progress:
                next_progress = self.d.clock() + self.d.progress_poll_s
                size = self._log_bytes()
                if size != log_bytes:
                    log_bytes = size
                    self.led.heartbeat(cluster=handle.cluster)
            if stop_reason is None:
                stop_reason = self._stop_requested()
                if stop_reason is not None:
                    self.d.notify(f"stopping ({stop_reason})")
                    execution.stop(self.job.grace_s)
                    continue
            # With a placement policy, a spot cluster may be lost while it still starts (as in the simulator).
            may_notice = run_started is not None or self._placement is not None
            if not noticed and notice_source is not None and may_notice and self.d.clock() >= next_notice:
                next_notice = self.d.clock() + notice_every
                why = notice_source(handle, self.d.clock() - run_started if run_started is not None else 0.0)
                if why:
                    noticed = True
                    self.led.add_event(self.job.run_id, EventKind.PREEMPTION, {"reason": why, "cluster": handle.cluster}, attempt_id=attempt_id)
                    self.d.notify(f"preemption notice: {why}")
                    execution.notify_preemption(self.job.grace_s)
            if self._placement is not None and not noticed and stop_reason is None and held is not None:
                now = self.d.clock()
                cap = self._placement.capacity()
                if now >= next_tick - 1e-9 or cap != capacity:  # a tick-equivalent: timer or capacity change
                    while next_tick <= now + 1e-9:
                        next_tick += self.d.placement_tick_s
                    capacity = cap
                    overhead_left = 0.0 if run_started is not None else self.d.restart_overhead_hours * 3600.0 - (now - (attempt_started or now))
                    running = (now - run_started) if run_started is not None else 0.0
                    target = self._placement_tick(held, cap, running, overhead_left)
                    if target is not False:
                        noticed, self._moving, self._move_to = True, True, target
                        where = "nothing" if target is None else (
                            f"{target.offer.cloud}/{target.offer.region} {'spot' if target.offer.spot else 'on-demand'}")
                        self.d.notify(f"placement: moving to {where}")
                        execution.notify_preemption(self.job.grace_s)

    def _log_bytes(self) -> int:
        logs = self.job.run_dir / "logs"
        try:
            return sum(p.stat().st_size for p in logs.iterdir() if p.is_file())
        except OSError:
            return 0

    def _running_again(self, attempt_id: str, recovered_from: float | None) -> float:
        """The job's `run` phase started. On a replacement attempt, a `recovery` event on it says
        when the job ran again and the restart overhead paid (provision + setup), which the
        cost report counts as waste."""
        now = self.d.clock()
        if recovered_from is not None:
            overhead = round(max(0.0, now - recovered_from), 3)
            data = {"running_again": True, "restart_overhead_seconds": overhead}
            self.led.add_event(self.job.run_id, EventKind.RECOVERY, data, attempt_id=attempt_id)
        return now

    def _checkpoint_watch(self) -> CheckpointWatch:
        if self._ckpt_watch is None:
            self._ckpt_watch = CheckpointWatch(str(self.job.checkpoint_dir))
            self._ckpt_watch.baseline()
        return self._ckpt_watch

    def _record_checkpoint(self, watch: CheckpointWatch, attempt_id: str) -> None:
        seen = watch.new()
        if seen is not None:
            self.led.add_event(self.job.run_id, EventKind.CHECKPOINT, seen.event_data(), attempt_id=attempt_id)

    def _stop_requested(self) -> str | None:
        """Cancel flag, someone else's STOPPING in the ledger, or the run's budget spent."""
        if self._cancel.is_set():
            self._enter_stopping(EndReason.CANCELLED)
            return EndReason.CANCELLED
        if not self._beat():
            return None
        run = self.led.get_run(self.job.run_id)
        if run.state == RunState.STOPPING or is_terminal(run.state):
            self._state = run.state
            return EndReason.CANCELLED
        why = (self.d.budget_stop or default_budget_stop)(self.led, self.job.run_id)
        if why:
            with self.led.transaction():  # the stop's reason and STOPPING: the final state reads the one to name the other
                self.led.add_event(self.job.run_id, EventKind.BUDGET_STOP, {"reason": why})
                self._enter_stopping(EndReason.BUDGET_STOP)
            self.d.notify(f"budget stop: {why}")
            return EndReason.BUDGET_STOP
        return None

    # ---- ledger-first transitions -------------------------------------------------------------
    @contextmanager
    def _together(self) -> Iterator[None]:
        """The ledger writes of the block land together or not at all. A _Stopped raised inside
        (cancel, or another process moved the run) still commits what was written, STOPPING
        included: those facts are true."""
        stopped = False
        with self.led.transaction():
            try:
                yield
            except _Stopped:
                stopped = True
        if stopped:
            raise _Stopped

    def _end_attempt(self, end: _AttemptEnd) -> None:
        if end.attempt_id is not None:
            self.led.end_attempt(end.attempt_id, end.reason, exit_code=end.exit_code, ended_at=end.ended_at)

    def _transition(self, dst: str, *, reason: str | None = None, data: dict | None = None, ending: _AttemptEnd | None = None) -> None:
        """Move the run to `dst` (compare-and-set). `ending`: the attempt that ended, closed in
        the same transaction."""
        if ending is not None:
            with self._together():
                self._end_attempt(ending)
                self._transition(dst, reason=reason, data=data)
            return
        if self._cancel.is_set() and dst not in (RunState.STOPPING, RunState.CANCELLED, RunState.BUDGET_STOPPED, RunState.FAILED):
            self._enter_stopping(EndReason.CANCELLED)
            raise _Stopped
        if not can_transition(self._state, dst):
            raise AssertionError(f"illegal transition {self._state} -> {dst}")  # a bug, not input
        try:
            rec = self.led.set_run_state(self.job.run_id, dst, reason=reason, expected_from=self._state, data=data)
        except ConflictError:
            self._state = self.led.get_run(self.job.run_id).state
            raise _Stopped from None
        self._state = rec.state

    def _enter_stopping(self, reason: str) -> None:
        if self._state == RunState.STOPPING or is_terminal(self._state):
            return
        try:
            rec = self.led.set_run_state(self.job.run_id, RunState.STOPPING, reason=reason, expected_from=self._state)
            self._state = rec.state
        except ConflictError:
            self._state = self.led.get_run(self.job.run_id).state

    def _finish_stopping(self) -> None:
        if is_terminal(self._state):
            return
        self._enter_stopping(EndReason.CANCELLED)
        from launcher.controller.cleanup import abandon_open_attempts

        abandon_open_attempts(self.led, self.job.run_id, self.job.run_dir, self.d.provider_for, reason=EndReason.CANCELLED,
                              release_for=self._release_for)  # fmt: skip
        stop_events = self.led.events(self.job.run_id, kind=EventKind.BUDGET_STOP)
        final = RunState.BUDGET_STOPPED if stop_events else RunState.CANCELLED
        try:
            rec = self.led.set_run_state(
                self.job.run_id, final, reason=EndReason.BUDGET_STOP if stop_events else EndReason.CANCELLED,
                expected_from=RunState.STOPPING,
            )  # fmt: skip
            self._state = rec.state
        except ConflictError:
            self._state = self.led.get_run(self.job.run_id).state

    def _end_for_disk_full(self, full: DiskFullError) -> bool:
        """End the run FAILED (disk_full) after a full disk: with the reserve's room, stop the
        job, close its attempt, tear its cluster down. False when even that could not be written
        (the run then stays for `launch --resume`, `down` or `doctor` once there is room)."""
        from launcher.controller.cleanup import abandon_open_attempts
        from launcher.executors.local import kill_recorded_processes

        self.d.notify(f"{full.message}; ending the run")
        try:
            kill_recorded_processes(self.job.run_dir, grace_s=5.0, run_id=self.job.run_id)  # it would eat the room freed next
        finally:
            self._reserve.release()
        try:
            abandon_open_attempts(self.led, self.job.run_id, self.job.run_dir, self.d.provider_for, reason=EndReason.DISK_FULL)
            state = self.led.get_run(self.job.run_id).state
            if not is_terminal(state):
                with self.led.transaction():
                    self.led.add_event(self.job.run_id, EndReason.DISK_FULL, {"error": full.message})
                    self.led.set_run_state(self.job.run_id, RunState.FAILED, reason=EndReason.DISK_FULL, expected_from=state)
            self._state = self.led.get_run(self.job.run_id).state
        except Exception:
            return False
        return True

    def _fail(self, reason: str, detail: str, *, exit_code: int | None = None, ending: _AttemptEnd | None = None) -> None:
        data = {"detail": detail}
        if exit_code is not None:
            data["exit_code"] = exit_code
        self._transition(RunState.FAILED, reason=reason, data=data, ending=ending)

    def _release_for(self, provider: str) -> Executor | None:
        """The executor whose SkyPilot cluster an attempt on `provider` leaves behind (declared
        clusters), for cleanup to ask what its job did and to `sky down` it; None elsewhere."""
        from launcher.executors import keeps_sky_cluster

        return self.d.executor_for(provider) if keeps_sky_cluster(provider) else None

    def _teardown(self, provider: Provider, handle: ClusterHandle | None, cluster: str, attempt_id: str, *, executor=None) -> None:
        with self.led.transaction():
            self.led.set_cluster_state(cluster, ClusterState.TERMINATING)
            self.led.add_event(self.job.run_id, EventKind.TEARDOWN, {"cluster": cluster}, attempt_id=attempt_id)
        released = True
        if handle is not None:
            if executor is not None:
                try:
                    executor.release(handle)  # the executor's own view of the cluster (SkyPilot's record)
                except Exception as e:  # the machines go with the provider's teardown below
                    released = False
                    self.led.add_event(self.job.run_id, EventKind.TEARDOWN, {"cluster": cluster, "release_error": str(e)}, attempt_id=attempt_id)
                    self.d.notify(f"teardown of {cluster}: {e}; it stays recorded as terminating (`launcher down {cluster}` retries)")
            provider.terminate(handle)
        if released:  # else it may still hold its allocation: `down` and `doctor` retry it
            self.led.set_cluster_state(cluster, ClusterState.TERMINATED)

    # ---- helpers ------------------------------------------------------------------------------
    def _start_clocks(self, run) -> None:
        now = datetime.now(UTC)
        self._started_clock = self.d.clock()
        self._age_at_start_s = max(0.0, (now - (run.created_at or now)).total_seconds())
        self._prior_work_s = sum(
            ((a.ended_at or now) - a.started_at).total_seconds()
            for a in self.led.attempts(self.job.run_id)
            if a.end_reason != EndReason.PROVISION_FAILED
        )

    def _spot_capacity(self) -> bool:
        """Whether spot capacity may exist now for some ranked spot offer. Providers that know
        (the optional `spot_available(offer, now) -> bool | None`, e.g. the local backend
        following a spot trace) are asked; unknown (None, no such capability, an error) counts
        as available, so we try rather than wait. No spot offer at all: True (nothing to wait for)."""
        now = datetime.now(UTC)
        answers: list[bool | None] = []
        for s in self.job.plan.ranked:
            o = s.offer
            if not o.spot or o.cloud in self._unusable_clouds:
                continue
            try:
                p = self.d.provider_for(o.cloud)
                answers.append(p.spot_available(o, now) if isinstance(p, SpotCapacity) else None)
            except Exception:  # a provider that cannot answer must not stop the run
                answers.append(None)
            if answers[-1] is not False:
                return True
        return not answers

    def _decision_state(self, previous: ScoredOffer | None, preemptions: int) -> DecisionState:
        """What a deadline-aware policy sees. The controller asks only when nothing is held (at
        a start, after a preemption, node loss or failed provision), so `current` is NONE and no
        restart overhead is being paid. Work done is approximated by the time attempts spent in
        their `run` phase (the controller cannot see inside the job; the work lost at a
        preemption is bounded by the job's checkpoint interval)."""
        elapsed_s = self._age_at_start_s + (self.d.clock() - self._started_clock)
        done_s = self._prior_work_s + self._work_s
        prev = previous.offer if previous else None
        spot = [s.offer.price_usd_per_hour for s in self.job.plan.ranked if s.offer.spot]
        od = [s.offer.price_usd_per_hour for s in self.job.plan.ranked if not s.offer.spot]
        return DecisionState(
            elapsed_hours=elapsed_s / 3600.0,
            work_done_hours=done_s / 3600.0,
            work_total_hours=estimated_total_hours(
                self.job.plan.work_hours, done_s / 3600.0, self.d.placement_gap_hours or self.d.placement_tick_s / 3600.0
            ),
            deadline_hours=self.job.spec.launcher.deadline_hours,
            restart_overhead_hours=self.d.restart_overhead_hours,
            current=Choice.NONE,
            current_zone=0,
            spot_available=(self._spot_capacity(),),
            spot_price_usd_per_hour=min(spot) if spot else (prev.price_usd_per_hour if prev and prev.spot else None),
            on_demand_price_usd_per_hour=min(od) if od else None,
            preemptions=preemptions,
            overhead_remaining_hours=0.0,
        )

    # ---- placement policy (controller/placement.py) ----------------------------------------------
    def _placement_driver(self) -> PlacementDriver | None:
        if self.d.placement_policy is None:
            return None

        def capacity(offer):
            if offer.cloud in self._unusable_clouds:
                return False
            failed_at = self._capacity_errors.get(offer)
            if failed_at is not None and self.d.clock() - failed_at < self.d.placement_tick_s:
                return False  # it just refused us: no capacity there for a tick
            provider = self.d.provider_for(offer.cloud)
            return provider.spot_available(offer, datetime.now(UTC)) if isinstance(provider, SpotCapacity) else None

        spot = [s.offer for s in self.job.plan.ranked if s.offer.spot]
        return PlacementDriver(
            self.d.placement_policy, tuple(self.job.plan.ranked), work_hours=self.job.plan.work_hours,
            deadline_hours=self.job.spec.launcher.deadline_hours, restart_overhead_s=self.d.restart_overhead_hours * 3600.0,
            tick_s=self.d.placement_tick_s, capacity=capacity, gap_hours=self.d.placement_gap_hours,
            placement_scores=self._placement_scores(spot), history=self._placement_history(spot),
        )  # fmt: skip

    def _placement_history(self, spot: list[Offer]) -> dict:
        """Other runs' spot spells in the plan's zones (`placement_history`); an event says what was used."""
        history, event = read_history(self.led, spot, run_id=self.job.run_id, days=self.d.placement_history_days)
        if event is not None:
            self.led.add_event(self.job.run_id, "placement_history", event)
        return history

    def _placement_scores(self, spot: list[Offer]) -> dict:
        """The clouds' spot placement scores for the plan's spot offers (`placement_scores`), asked
        once per controller; what they said, or why they could not, is an event."""
        scores, events = ask_scores(spot, self.job.spec.num_nodes, self.d.provider_for)
        for data in events:
            self.led.add_event(self.job.run_id, "placement_scores", data)
        return scores

    def _placement_decide(self, held: ScoredOffer | None, cap: tuple[bool, ...], running_s: float,
                          overhead_left_s: float, preemptions: int):  # fmt: skip
        p = self._placement
        state = p.state(
            elapsed_s=self._age_at_start_s + (self.d.clock() - self._started_clock),
            work_done_s=self._prior_work_s + self._work_s + running_s, held=p.held(held),
            overhead_left_s=overhead_left_s, preemptions=preemptions, capacity=cap,
        )  # fmt: skip
        d = p.decide(state)
        data = p.event(d, state)
        if data is not None:
            self.led.add_event(self.job.run_id, PLACEMENT_EVENT, data)
        return d

    def _place_next(self, preemptions: int) -> ScoredOffer | None:
        """Nothing is held: what to start now (None = wait a tick)."""
        d = self._placement_decide(None, self._placement.capacity(), 0.0, 0.0, preemptions)
        return self._placement.offer_for(d)

    def _placement_tick(self, held: ScoredOffer, cap: tuple[bool, ...], running_s: float,
                        overhead_left_s: float) -> ScoredOffer | None | bool:  # fmt: skip
        """An attempt runs: False to keep it, else the offer to move to (None: stop holding)."""
        preemptions = sum(1 for a in self.led.attempts(self.job.run_id) if a.end_reason in (EndReason.PREEMPTED, EndReason.NODE_LOST))
        d = self._placement_decide(held, cap, running_s, overhead_left_s, preemptions)
        if not self._placement.is_move(d, self._placement.held(held)):
            return False
        return self._placement.offer_for(d)

    def _beat(self, force: bool = False) -> bool:
        now = self.d.clock()
        if force or now - self._last_beat >= self.d.heartbeat_interval_s:
            self._last_beat = now
            self.led.heartbeat(run_id=self.job.run_id)
            return True
        return False

    def _check_cancel(self) -> None:
        if self._stop_requested() is not None:
            raise _Stopped

    def _sleep_watchful(self, seconds: float, wake: Callable[[], bool] | None = None) -> float:
        """Sleep up to `seconds`, honoring cancel and budget; stop early once `wake()` is true.
        Returns the seconds slept."""
        start = self.d.clock()
        end = start + seconds
        while self.d.clock() < end:
            self._check_cancel()
            if wake is not None and wake():
                break
            self.d.sleep(min(self.d.poll_interval_s * 4, max(end - self.d.clock(), 0.0)))
        return self.d.clock() - start

    def _scored_for(self, attempt) -> ScoredOffer | None:
        """The ranked offer an attempt used (matched on cloud/region/zone/type/market)."""
        for s in self.job.plan.ranked:
            o = s.offer
            if (o.cloud, o.region, o.zone, o.instance_type, o.spot) == (
                attempt.cloud, attempt.region, attempt.zone, attempt.instance_type, attempt.spot,
            ):  # fmt: skip
                return s
        return None

    def _result(self) -> RunResult:
        run = self.led.get_run(self.job.run_id)
        attempts = self.led.attempts(self.job.run_id)
        code = next((a.exit_code for a in reversed(attempts) if a.exit_code is not None), None)
        return RunResult(run.run_id, run.state, run.end_reason, code, len(attempts))


def _end_reason(result: ExecResult, stop_reason: str | None) -> str:
    if stop_reason is not None:
        return stop_reason
    return {
        Outcome.SUCCEEDED: EndReason.COMPLETED,
        Outcome.SETUP_FAILED: EndReason.SETUP_FAILED,
        Outcome.FAILED: EndReason.FAILED,
        Outcome.PREEMPTED: EndReason.PREEMPTED,
        Outcome.NODE_LOST: EndReason.NODE_LOST,
        Outcome.CANCELLED: EndReason.CANCELLED,
        Outcome.NO_CAPACITY: EndReason.PROVISION_FAILED,  # nothing ran: like a cloud with no capacity
    }[result.outcome]


def _offer_dict(s: ScoredOffer) -> dict:
    o = s.offer
    return {
        "cloud": o.cloud, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
        "spot": o.spot, "price_usd_per_hour": o.price_usd_per_hour, "rank": s.rank,
    }  # fmt: skip


def _wait_line(reason: str | None, wait_s: float, left_s: float) -> str:
    """What the run waits for, when it checks next, and how long it may still wait (Ctrl-C stops it)."""
    at = (datetime.now(UTC) + timedelta(seconds=wait_s)).strftime("%H:%M:%S UTC")
    return (f"waiting: {reason or 'no offer can be placed now'}; next check in {wait_s:.0f}s (at {at}); "
            f"gives up after {max(left_s, 0.0) / 60:.0f} more min of waiting (launcher: max_wait); Ctrl-C cancels")
