"""One attempt: provision a cluster for the chosen offer, start the job with the executor, watch
it (preemption notices, new checkpoints, stop requests, the placement policy's ticks, what the
job waits for) and tear the cluster down. One attempt row per placement, opened before
provisioning; a job that ended on its own comes back with its attempt still open, closed by the
attempt loop together with the run's next state.

Part of `Controller`: uses its `job`, `d`, `led`, `_placement`, `_unusable_clouds`, `_moving`,
`_reserve` and `_work_s`, and the transitions, accounting, teardown and decisions parts.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass

from infra.tags import cluster_tags
from launcher.controller.billing_account import with_billing_account
from launcher.controller.checkpoint_watch import CheckpointWatch
from launcher.controller.decisions import offer_dict
from launcher.controller.disk_space import log_space_error
from launcher.controller.recovery import unretryable
from launcher.controller.transitions import AttemptEnd, Stopped
from launcher.errors import BadInputError, CredentialsError, LauncherError, ToolMissingError
from launcher.executors.base import ExecRequest, ExecResult, Outcome
from launcher.executors.job_status import RECORDABLE, EndedJob, record_outcome
from launcher.ledger.records import AttemptRecord, AttemptState, ClusterRecord, ClusterState, EndReason, EventKind, NewAttempt, RunState
from launcher.providers.base import ClusterHandle, ClusterRequest, PreemptionNotices, Provider
from pricing.models import ScoredOffer


SPACE_POLL_S = 1.0  # how often a running attempt checks there is room for its logs
# How long a look's launch is waited for before the watch goes on without its answer: a backend
# that answers at once (local, the simulator's doubles) moves in the same pass, as the simulator
# replays it; a cloud's launch (minutes) is read when it answers.
LOOK_INLINE_S = 5.0


class AttemptRunner:
    """Provision, execute, watch and tear down one attempt."""

    def _attempt(self, scored: ScoredOffer, why: str) -> AttemptEnd:
        """Provision, run and tear down one attempt. A job that ended on its own comes back with
        its attempt still open: the caller closes it together with the run's next state. A cluster
        the placement policy's look launched for this offer (`_look`) is run instead of a new one."""
        job, spec, offer = self.job, self.job.spec, scored.offer
        started = self.d.clock()
        paid_from = started  # when this attempt's cluster began to cost: the restart overhead counts from here
        ready, self._ready = self._ready, None
        if ready is not None and ready.scored.offer != offer:  # the move went elsewhere after all
            self._drop_look(ready)
            ready = None
        if ready is not None:
            opened, handle, paid_from = ready.opened, ready.handle, ready.opened_at
            try:
                with self._together():  # the run provisions this attempt: its cluster is up already
                    self._transition(RunState.PROVISIONING, data={"offer": offer_dict(scored), "why": why, "launched_before_move": True})
            except Stopped:
                self._drop_look(ready)
                raise
        else:
            opened = self._open_attempt(scored, why, transition=True)
            self.d.notify(f"attempt {opened.seq}: provisioning {offer.cloud}/{offer.region} {offer.instance_type}")
            handle = self._provision(opened)
            if isinstance(handle, AttemptEnd):
                return handle
        attempt, seq, cluster, provider = opened.attempt, opened.seq, opened.cluster, opened.provider
        replaces = any(a.end_reason != EndReason.PROVISION_FAILED for a in self.led.attempts(job.run_id)
                       if a.attempt_id != attempt.attempt_id)  # a job ran before  # fmt: skip
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
        except Stopped:
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
            execution, provider, handle, attempt.attempt_id, watch, recovered_from=paid_from if replaces else None,
            held=scored, attempt_started=started,
        )
        reason = _end_reason(result, stop_reason)
        if self._moving and reason == EndReason.PREEMPTED and stop_reason is None:
            reason = EndReason.MOVED  # we asked it to stop: the job checkpointed and exited
        if reason != EndReason.MOVED and self._ready is not None:  # it ended otherwise: the launched cluster goes
            self._drop_look(self._ready)
            self._ready = None
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
            raise Stopped
        queued = self.d.clock() - started if result.outcome is Outcome.NO_CAPACITY else 0.0
        return AttemptEnd(reason, result.exit_code, scored, result.detail, attempt.attempt_id, ended_at, unretryable(result), queued_s=queued)

    def _watch(self, execution, provider, handle: ClusterHandle, attempt_id: str, watch: CheckpointWatch,
               *, recovered_from: float | None, held: ScoredOffer | None = None,
               attempt_started: float | None = None):  # fmt: skip
        """Poll until the job ends; deliver preemption notices; record new checkpoints; honor
        stop requests. `recovered_from`: when this attempt replaces an earlier one, the clock when
        its cluster began to cost (a look's: its launch); the restart overhead runs from there until
        the job runs again."""
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
        capacity = self._placement.capacity(held) if self._placement is not None else ()
        waiting_for = None
        next_space = self.d.clock()
        look: PendingLook | None = None  # a spot launch for a move, answering in the background
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
                if look is not None:  # the job ended during a launch: wait for its answer, then `_attempt` drops it
                    if not look.future.done():
                        self.d.notify(f"waiting for the spot launch of attempt {look.opened.seq} to answer, to tear it "
                                      "down (bounded by the cloud's launch timeout)")  # fmt: skip
                    self._ready = self._looked(look)
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
            if self._placement is not None and not noticed and stop_reason is None and held is not None and look is None:
                now = self.d.clock()
                cap = self._placement.capacity(held)
                if now >= next_tick - 1e-9 or cap != capacity:  # a tick-equivalent: timer or capacity change
                    while next_tick <= now + 1e-9:
                        next_tick += self.d.placement_tick_s
                    capacity = cap
                    overhead_left = 0.0 if run_started is not None else self.d.restart_overhead_hours * 3600.0 - (now - (attempt_started or now))
                    running = (now - run_started) if run_started is not None else 0.0
                    target = self._placement_tick(held, cap, running, overhead_left)
                    if target is not None and target is not False and target.offer.spot:
                        look = self._look(target)  # make-before-break: the job runs on meanwhile
                        target = False  # the move waits for the launch (below, in this pass if it answers at once)
                    if target is not False:
                        noticed = self._move(execution, target)
            if look is not None and look.answered():
                ready, look = self._looked(look), None
                if ready is None:  # refused: what is held runs on, the zone counts as seen without capacity
                    capacity = self._placement.capacity(held)
                else:
                    self._ready = ready  # if the job ends otherwise meanwhile, `_attempt` drops it
                    if not noticed and stop_reason is None:
                        noticed = self._move(execution, ready.scored)

    def _open_attempt(self, scored: ScoredOffer, why: str, *, transition: bool) -> OpenedAttempt:
        """The attempt row and its cluster record, before anything is provisioned (so a crash
        after this leaves something for the next command's cleanup to find). `transition`: the
        run moves to PROVISIONING in the same change (a look launches while the run runs)."""
        job, spec, offer = self.job, self.job.spec, scored.offer
        seq = len(self.led.attempts(job.run_id)) + 1
        cluster = f"{job.run_id}-c{seq}"
        provider = self.d.provider_for(offer.cloud)
        # The account is asked of the cloud before the transaction below: no cloud call inside it.
        new = with_billing_account(NewAttempt.from_offer(offer, num_nodes=spec.num_nodes, cluster=cluster), provider)
        tags = cluster_tags(job.tags, cluster=cluster, run_id=job.run_id)
        with self._together():  # the run provisions this attempt on this cluster: one change
            if transition:
                self._transition(RunState.PROVISIONING, data={"offer": offer_dict(scored), "why": why})
            attempt = self.led.add_attempt(job.run_id, new)
            if not transition:  # a look: never the run's last word on resume unless it ran (teardown.py)
                self.led.add_event(job.run_id, EventKind.LOOK, {"offer": offer_dict(scored)}, attempt_id=attempt.attempt_id)
            self.led.upsert_cluster(
                ClusterRecord(
                    name=cluster, provider=offer.cloud, region=offer.region, zone=offer.zone,
                    state=ClusterState.PROVISIONING, run_id=job.run_id, project=spec.launcher.project, tags=tags,
                )
            )  # fmt: skip
        return OpenedAttempt(scored, attempt, seq, cluster, provider, tags)

    def _cluster_request(self, opened: OpenedAttempt) -> ClusterRequest:
        job, spec = self.job, self.job.spec
        return ClusterRequest(
            cluster=opened.cluster, offer=opened.scored.offer, num_nodes=spec.num_nodes, tags=opened.tags,
            image_id=spec.resources.image, disk_size_gib=spec.resources.disk_size,
            ssh_allowed_cidr=job.ssh_allowed_cidr,
        )  # fmt: skip

    def _provision(self, opened: OpenedAttempt) -> ClusterHandle | AttemptEnd:
        """Provision the opened attempt's cluster; a refusal tears down what was made and ends
        the attempt as `provision_failed` (the AttemptEnd returned)."""
        request = self._cluster_request(opened)
        return self._provisioned(opened, lambda: opened.provider.provision(request))

    def _provisioned(self, opened: OpenedAttempt, launch) -> ClusterHandle | AttemptEnd:
        """`launch()`'s cluster (the provider's provision, or a look's answer); a refusal tears down
        what was made and ends the attempt as `provision_failed` (the AttemptEnd returned)."""
        job, offer = self.job, opened.scored.offer
        try:
            return launch()
        except LauncherError as e:
            # Missing tool, credentials or configuration fail every offer of that cloud alike.
            whole_cloud = isinstance(e, ToolMissingError | CredentialsError | BadInputError)
            self.led.add_event(
                job.run_id, EventKind.PROVISION, {"ok": False, "error": str(e), "cloud_unusable": whole_cloud},
                attempt_id=opened.attempt.attempt_id,
            )  # fmt: skip
            ended_at = self.led.now()
            self._teardown(opened.provider, None, opened.cluster, opened.attempt.attempt_id)
            if whole_cloud:
                self._unusable_clouds.add(offer.cloud)
                self.d.notify(f"{offer.cloud}: {e}; skipping its offers")
            return AttemptEnd(EndReason.PROVISION_FAILED, detail=str(e), offer=opened.scored,
                              attempt_id=opened.attempt.attempt_id, ended_at=ended_at)  # fmt: skip

    def _move(self, execution, target: ScoredOffer | None) -> bool:
        """Ask the running job to stop for the move (to `target`, or to nothing); True: noticed."""
        self._moving, self._move_to = True, target
        where = "nothing" if target is None else (
            f"{target.offer.cloud}/{target.offer.region} {'spot' if target.offer.spot else 'on-demand'}")
        self.d.notify(f"placement: moving to {where}")
        execution.notify_preemption(self.job.grace_s)
        return True

    def _look(self, target: ScoredOffer) -> PendingLook:
        """Before the running job is stopped for spot elsewhere, launch the spot cluster: a cloud
        that cannot say where spot capacity is answers only a launch, and a refusal must not cost
        the cluster that runs (make-before-break, as the simulator replays it). The launch is an
        attempt of its own, opened here; the cloud is asked on a thread of its own, so that while
        it answers (minutes on a cloud) the watch goes on: stop requests, preemption notices,
        checkpoints, the job's end. `_looked` reads the answer."""
        opened_at = self.d.clock()
        opened = self._open_attempt(target, "placement policy: launch before the move", transition=False)
        o = target.offer
        self.d.notify(f"attempt {opened.seq}: launching {o.cloud}/{o.region} {o.instance_type} spot before the move")
        request, future = self._cluster_request(opened), Future()

        def launch() -> None:
            future.set_running_or_notify_cancel()
            try:
                future.set_result(opened.provider.provision(request))
            except BaseException as e:  # read, and raised, where the answer is read
                future.set_exception(e)

        # A daemon: a controller that dies (Ctrl-C) does not wait for the cloud; the attempt and
        # cluster rows opened above let the next command tear down what the launch made.
        threading.Thread(target=launch, name=f"look-{opened.cluster}", daemon=True).start()
        return PendingLook(target, opened, opened_at, future, wait_s=LOOK_INLINE_S)

    def _looked(self, look: PendingLook) -> ReadyCluster | None:
        """The look's answer, waiting for it if it has not come (a launch is bounded by the
        provider's own timeouts). Refused: the attempt ends `provision_failed`, the zone counts as
        seen without capacity and the job runs on (None)."""
        handle = self._provisioned(look.opened, look.future.result)
        if isinstance(handle, AttemptEnd):
            self.led.end_attempt(look.opened.attempt.attempt_id, EndReason.PROVISION_FAILED, ended_at=handle.ended_at)
            self._placement.refused(look.scored)
            self.d.notify(f"attempt {look.opened.seq}: refused ({handle.detail}); the running job stays")
            return None
        return ReadyCluster(look.scored, look.opened, look.opened_at, handle)

    def _drop_look(self, ready: ReadyCluster) -> None:
        """A cluster launched for a move that did not happen (the job ended or was stopped first)."""
        a = ready.opened
        self.led.end_attempt(a.attempt.attempt_id, EndReason.CANCELLED)
        self._teardown(a.provider, ready.handle, a.cluster, a.attempt.attempt_id)


@dataclass(frozen=True)
class OpenedAttempt:
    """An attempt row and its cluster's name, opened before its cluster is provisioned."""

    scored: ScoredOffer
    attempt: AttemptRecord
    seq: int
    cluster: str
    provider: Provider
    tags: dict


@dataclass
class PendingLook:
    """A spot launch for a move, asked of the cloud on a thread of its own (`AttemptRunner._look`)."""

    scored: ScoredOffer
    opened: OpenedAttempt
    opened_at: float  # the controller's clock when the attempt was opened
    future: Future
    wait_s: float  # how long the answer is waited for the first time it is asked; then only read

    def answered(self) -> bool:
        """Has the cloud answered (waiting `wait_s` for it the first time asked)?"""
        wait_s, self.wait_s = self.wait_s, 0.0
        return bool(futures_wait([self.future], timeout=wait_s).done)


@dataclass(frozen=True)
class ReadyCluster:
    """A spot cluster launched for a move while the job still ran (`AttemptRunner._look`). It
    costs from `opened_at`: its restart overhead (the `recovery` event's, what the cost report
    counts as waste) runs from then, not from the move, to the job running on it."""

    scored: ScoredOffer
    opened: OpenedAttempt
    opened_at: float
    handle: ClusterHandle


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
