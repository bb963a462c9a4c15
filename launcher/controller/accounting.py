"""What the ledger learns while a job runs, for billing and for the reaper: controller heartbeats,
the job's progress as the cluster's heartbeat (new log output), the checkpoints seen in the job's
store (`checkpoint` events) and, on a replacement attempt, when the job ran again with the restart
overhead paid (`recovery` event with `restart_overhead_seconds`): the cost report's inputs.

Part of `Controller`: uses its `job`, `d`, `led`, `_last_beat` and `_ckpt_watch`.
"""

from __future__ import annotations

from launcher.controller.checkpoint_watch import CheckpointWatch
from launcher.ledger.records import EventKind


class Accounting:
    """Heartbeats, progress, checkpoints and restart overhead in the ledger."""

    def _beat(self, force: bool = False) -> bool:
        now = self.d.clock()
        if force or now - self._last_beat >= self.d.heartbeat_interval_s:
            self._last_beat = now
            self.led.heartbeat(run_id=self.job.run_id)
            return True
        return False

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
