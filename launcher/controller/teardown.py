"""Clusters and attempts left behind: the teardown at the end of each attempt (the executor's
release, e.g. `sky down`, then the provider's terminate; a release that fails leaves the cluster
`terminating` for `down`/`doctor`), the cleanup a resumed controller does for what its dead
predecessor left open (launcher.controller.cleanup, then settling a run whose job ended on its
own), the cleanup when the run is stopped, and ending the run after a full disk.

Part of `Controller`: uses its `job`, `d`, `led`, `_state` and `_reserve`, and the transitions.
"""

from __future__ import annotations

from launcher.controller.recovery import unretryable_exit
from launcher.controller.states import can_transition, is_terminal
from launcher.errors import ConflictError, DiskFullError
from launcher.executors.base import Executor
from launcher.ledger.records import AttemptRecord, ClusterState, EndReason, EventKind, RunState
from launcher.providers.base import ClusterHandle, Provider
from pricing.models import ScoredOffer


class Teardown:
    """Teardown, resume cleanup and the end of a stopped run."""

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
        attempts = self._attempts_that_ran()
        last = attempts[-1] if attempts else None
        if last is None:
            return False
        if last.end_reason == EndReason.COMPLETED and can_transition(self._state, RunState.SUCCEEDED):
            self._transition(RunState.SUCCEEDED, reason=EndReason.COMPLETED)
            return True
        failures = sum(1 for a in attempts if a.end_reason == EndReason.FAILED)
        runtime_exit = self._runtime_exit(last) if last.end_reason == EndReason.FAILED else None
        give_up = last.end_reason == EndReason.SETUP_FAILED or runtime_exit is not None or (
            last.end_reason == EndReason.FAILED and failures > self.job.spec.launcher.max_restarts
        )
        if give_up and can_transition(self._state, RunState.FAILED):
            detail = f"the job exited with {last.exit_code} while no controller watched"
            if runtime_exit is not None:
                detail += f" ({runtime_exit}: not retried)"
            self._fail(last.end_reason, detail, exit_code=last.exit_code)
            return True
        return False

    def _attempts_that_ran(self) -> list[AttemptRecord]:
        """The run's attempts less the looks that never ran a job (a launch before a move that the
        controller died in, or dropped): how the run ended is the last real attempt's to say."""
        looks = {e.attempt_id for e in self.led.events(self.job.run_id, kind=EventKind.LOOK)}
        if not looks:
            return self.led.attempts(self.job.run_id)
        ran = {e.attempt_id for e in self.led.events(self.job.run_id, kind=EventKind.PROVISION) if e.data.get("ok")}
        return [a for a in self.led.attempts(self.job.run_id) if a.attempt_id not in looks or a.attempt_id in ran]

    def _runtime_exit(self, attempt: AttemptRecord) -> str | None:
        """Why `attempt`'s exit code is the runtime's, not the job's (as the live controller's
        `unretryable` reads it; the runtime from the attempt's image event), or None."""
        runtime = "host"
        for e in self.led.events(self.job.run_id, kind="image"):
            if e.attempt_id == attempt.attempt_id:
                runtime = str(e.data.get("image_runtime", "host"))
        return unretryable_exit(attempt.exit_code, runtime)

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
            abandon_open_attempts(self.led, self.job.run_id, self.job.run_dir, self.d.provider_for, reason=EndReason.DISK_FULL,
                                  release_for=self._release_for)  # fmt: skip
            state = self.led.get_run(self.job.run_id).state
            if not is_terminal(state):
                with self.led.transaction():
                    self.led.add_event(self.job.run_id, EndReason.DISK_FULL, {"error": full.message})
                    self.led.set_run_state(self.job.run_id, RunState.FAILED, reason=EndReason.DISK_FULL, expected_from=state)
            self._state = self.led.get_run(self.job.run_id).state
        except Exception:
            return False
        return True

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
