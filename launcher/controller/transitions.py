"""The run's state machine as the controller drives it, ledger first: every state change is a
compare-and-set in the ledger *before* it takes effect, and a run another process moved (e.g.
`launcher down` wrote STOPPING) stops this controller (`Stopped`). Also the stop requests it
honours at every step: its own cancel flag, someone else's STOPPING, the run's budget spent.

Part of `Controller` (launcher.controller.controller): uses its `job`, `d` (deps), `led`,
`_state` and `_cancel`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from launcher.controller.run_job import default_budget_stop
from launcher.controller.states import can_transition, is_terminal
from launcher.errors import ConflictError
from launcher.ledger.records import EndReason, EventKind, RunState
from pricing.models import ScoredOffer


class Stopped(Exception):
    """Someone else moved the run to STOPPING/terminal, or cancel was requested."""


@dataclass
class AttemptEnd:
    reason: str  # EndReason
    exit_code: int | None = None
    offer: ScoredOffer | None = None
    detail: str = ""
    attempt_id: str | None = None  # still open: closed together with the run's next state
    ended_at: datetime | None = None
    unretryable: str | None = None  # why retrying cannot help (launcher.controller.recovery.unretryable)
    queued_s: float = 0.0  # time the attempt's job waited queued for room on the cluster (counts as waiting)


class Transitions:
    """Ledger-first transitions and stop requests."""

    def _transition(self, dst: str, *, reason: str | None = None, data: dict | None = None, ending: AttemptEnd | None = None) -> None:
        """Move the run to `dst` (compare-and-set). `ending`: the attempt that ended, closed in
        the same transaction."""
        if ending is not None:
            with self._together():
                self._end_attempt(ending)
                self._transition(dst, reason=reason, data=data)
            return
        if self._cancel.is_set() and dst not in (RunState.STOPPING, RunState.CANCELLED, RunState.BUDGET_STOPPED, RunState.FAILED):
            self._enter_stopping(EndReason.CANCELLED)
            raise Stopped
        if not can_transition(self._state, dst):
            raise AssertionError(f"illegal transition {self._state} -> {dst}")  # a bug, not input
        try:
            rec = self.led.set_run_state(self.job.run_id, dst, reason=reason, expected_from=self._state, data=data)
        except ConflictError:
            self._state = self.led.get_run(self.job.run_id).state
            raise Stopped from None
        self._state = rec.state

    @contextmanager
    def _together(self) -> Iterator[None]:
        """The ledger writes of the block land together or not at all. A Stopped raised inside
        (cancel, or another process moved the run) still commits what was written, STOPPING
        included: those facts are true."""
        stopped = False
        with self.led.transaction():
            try:
                yield
            except Stopped:
                stopped = True
        if stopped:
            raise Stopped

    def _end_attempt(self, end: AttemptEnd) -> None:
        if end.attempt_id is not None:
            self.led.end_attempt(end.attempt_id, end.reason, exit_code=end.exit_code, ended_at=end.ended_at)

    def _enter_stopping(self, reason: str) -> None:
        if self._state == RunState.STOPPING or is_terminal(self._state):
            return
        try:
            rec = self.led.set_run_state(self.job.run_id, RunState.STOPPING, reason=reason, expected_from=self._state)
            self._state = rec.state
        except ConflictError:
            self._state = self.led.get_run(self.job.run_id).state

    def _fail(self, reason: str, detail: str, *, exit_code: int | None = None, ending: AttemptEnd | None = None) -> None:
        data = {"detail": detail}
        if exit_code is not None:
            data["exit_code"] = exit_code
        self._transition(RunState.FAILED, reason=reason, data=data, ending=ending)

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

    def _check_cancel(self) -> None:
        if self._stop_requested() is not None:
            raise Stopped

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
