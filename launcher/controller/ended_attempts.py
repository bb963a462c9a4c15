"""Closing an attempt that its controller left open, with what its job actually did.

A local job's wrapper records each rank's exit code in the run directory when the job ends
(`launcher.executors.job_status`), so a job that ended while its controller was dead is recorded
as it ended: exit 75 (checkpointed on a preemption notice) `preempted`, 0 `completed`, another
code `failed` (`setup_failed` in setup), at the time the code was written. A job with no such
record (still running when cleanup stopped it, or killed outright) is closed with the caller's
reason (`abandoned` for a crash). The checkpoint the job saved while nobody watched is recorded
as the controller would have, so the report prices the preemption and the resume starts there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from launcher.controller.checkpoint_watch import CheckpointWatch
from launcher.errors import ConflictError
from launcher.executors.base import Outcome
from launcher.executors.job_status import EndedJob, attempt_info, ended_outcome
from launcher.ledger.interfaces import LedgerWriter
from launcher.ledger.records import AttemptRecord, EndReason, EventKind

CLEANUP_EVENT = "attempt_closed"

_REASONS = {
    Outcome.PREEMPTED: EndReason.PREEMPTED,
    Outcome.SUCCEEDED: EndReason.COMPLETED,
    Outcome.FAILED: EndReason.FAILED,
    Outcome.SETUP_FAILED: EndReason.SETUP_FAILED,
}


def ended_jobs(run_dir: Path, attempts: list[AttemptRecord]) -> dict[str, EndedJob]:
    """attempt id -> how its job ended on its own (read this before stopping any process)."""
    out = {}
    for a in attempts:
        job = ended_outcome(run_dir, a.seq, a.num_nodes)
        if job is not None:
            out[a.attempt_id] = job
    return out


def close_attempt(ledger: LedgerWriter, a: AttemptRecord, run_dir: Path, job: EndedJob | None, *, reason: str) -> str | None:
    """End the open attempt `a`: as its job ended when `job` says, else with `reason`. Returns
    the end reason written (None: someone else closed it first)."""
    if job is None:
        try:
            ledger.end_attempt(a.attempt_id, reason)
        except ConflictError:
            return None
        return reason
    end_reason = _REASONS[job.outcome]
    ended_at = datetime.fromtimestamp(job.ended_at_unix, UTC) if job.ended_at_unix else None
    if ended_at is not None and ended_at < a.started_at:
        ended_at = None
    step = _record_checkpoint(ledger, a, run_dir)  # true on its own: the job saved it
    data = {"attempt": a.seq, "end_reason": str(end_reason), "exit_code": job.exit_code, "detail": job.detail,
            "from": job.source}  # fmt: skip
    if step is not None:
        data["checkpoint_step"] = step
    try:
        with ledger.transaction():  # the attempt's end and where it was learned land together
            ledger.end_attempt(a.attempt_id, end_reason, exit_code=job.exit_code, ended_at=ended_at)
            ledger.add_event(a.run_id, CLEANUP_EVENT, data, attempt_id=a.attempt_id)
    except ConflictError:
        return None
    return end_reason


def _record_checkpoint(ledger: LedgerWriter, a: AttemptRecord, run_dir: Path) -> int | None:
    """Record the newest checkpoint when no event names it yet; the step of the attempt's last
    checkpoint (None: it saved none)."""
    events = ledger.events(a.run_id, kind=EventKind.CHECKPOINT)
    location = attempt_info(run_dir, a.seq).get("checkpoint_dir")
    if location:
        seen = frozenset(str(e.data.get("checkpoint_id")) for e in events)
        new = CheckpointWatch(location, seen=seen).new()
        if new is not None:
            ledger.add_event(a.run_id, EventKind.CHECKPOINT, new.event_data(), attempt_id=a.attempt_id)
            return new.step
    steps = [e.data.get("step") for e in events if e.attempt_id == a.attempt_id and isinstance(e.data.get("step"), int)]
    return steps[-1] if steps else None
