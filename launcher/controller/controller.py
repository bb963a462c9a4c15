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
  (the optional `spot_available(offer, now)`; for a placement policy, else what the run saw:
  capacity_probes.py), the run's age and
  the attempts' running time on the injected clock, the deadline. A wait ends early when spot
  capacity comes back.
* Per attempt the ledger also gets the job's new checkpoints as seen in its store
  (`checkpoint` events) and, on a replacement attempt, when the job ran again with the restart
  overhead paid (`recovery` event with `restart_overhead_seconds`): the cost report's inputs.

This module holds the attempt loop (`_loop`: which offer next, restart, recover, wait or give up).
The rest of `Controller` lives beside it, one part per concern, mixed into the one class:
`transitions.py` (ledger-first state changes and stop requests), `attempt.py` (one attempt:
provision, execute, watch), `accounting.py` (heartbeats, checkpoints, restart overhead),
`teardown.py` (teardown, resume cleanup, the end of a stopped run) and `decisions.py` (what the
recovery and placement policies see); `run_job.py` holds the job, the injected deps and the result.
"""

from __future__ import annotations

import threading

from launcher.controller.accounting import Accounting
from launcher.controller.attempt import AttemptRunner
from launcher.controller.checkpoint_watch import CheckpointWatch
from launcher.controller.decisions import Decisions, offer_dict, wait_line
from launcher.controller.disk_space import SpaceReserve, as_disk_full
from launcher.controller.liveness import CONTROLLER_EVENT, ControllerInfo, this_controller
from launcher.controller.run_job import ControllerDeps, RunJob, RunResult, default_budget_stop  # noqa: F401  (re-exported)
from launcher.controller.states import is_terminal
from launcher.controller.teardown import Teardown
from launcher.controller.transitions import Stopped, Transitions
from launcher.errors import DiskFullError
from launcher.ledger.records import EndReason, EventKind, RunState
from launcher.policies.base import RecoveryContext
from pricing.models import ScoredOffer


class Controller(AttemptRunner, Decisions, Accounting, Teardown, Transitions):
    """Drives one run to an end (see the module docstring); the parts named there are mixed in."""

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
        self._moving = False  # the placement policy asked the running job to stop
        self._move_to: ScoredOffer | None = None  # ... and this offer next (None: hold nothing for a tick)
        self._ready = None  # a spot cluster launched for that move before the job was stopped (attempt.py)

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
                raise Stopped
            previous = self._resume_point()
            if not is_terminal(self._state):
                self._loop(previous)
        except Stopped:
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
            self._record_open_outages()
            self._reserve.release()
            if self.d.observer is not None:
                self._tell_observer_ended()
        return self._result()

    def _tell_observer_ended(self) -> None:
        try:
            self.d.observer.run_ended(self._state)
        except Exception as e:  # tracking never fails a run
            self.led.add_event(self.job.run_id, "observer_error", {"error": f"{type(e).__name__}: {e}"})

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
                    self.d.notify(wait_line(decision.reason, wait, self.d.max_wait_s - waited_s))
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
                    self.led.add_event(self.job.run_id, EventKind.RECOVERY, {"policy": self.d.policy.name, "offer": offer_dict(offer), "reason": why})
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
                if end.reason == EndReason.PREEMPTED and self._placement is not None:
                    self._placement.refused(offer)  # the cloud took its capacity back
                preempted_regions.append(offer.offer.region)
                self._transition(RunState.RECOVERING, reason=end.reason, ending=end)
                continue
            if end.reason == EndReason.PROVISION_FAILED:
                self._transition(RunState.RECOVERING, reason="provision failed", data={"error": end.detail}, ending=end)
                if self._placement is not None:
                    self._placement.refused(offer)  # the policy would ask for the same offer at once
                    if waited_s + self.d.capacity_retry_s > self.d.max_wait_s:
                        self._fail(EndReason.PROVISION_FAILED, "no capacity for the placement policy's choices; giving up")
                        return
                    waited_s += self._sleep_watchful(self.d.capacity_retry_s)
                continue
            if end.reason == EndReason.MOVED:
                self._transition(RunState.RECOVERING, reason=EndReason.MOVED, ending=end)
                continue
            self._end_attempt(end)
            raise Stopped  # CANCELLED / BUDGET_STOP: the run is STOPPING already
        self._fail(EndReason.FAILED, f"gave up after {self.d.max_recoveries} recoveries")

    def _result(self) -> RunResult:
        run = self.led.get_run(self.job.run_id)
        attempts = self.led.attempts(self.job.run_id)
        code = next((a.exit_code for a in reversed(attempts) if a.exit_code is not None), None)
        return RunResult(run.run_id, run.state, run.end_reason, code, len(attempts))


__all__ = ["Controller", "ControllerDeps", "RunJob", "RunResult", "default_budget_stop"]
