"""The controller turns job progress (new log output) into the cluster's heartbeat, the signal
the reaper uses to tell a working job from a stalled one; a silent job does not beat."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.controller.controller import Controller
from launcher.executors.base import Outcome
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider


@dataclass
class Chatty(ScriptedExecution):
    """Writes a log line on every poll, like a training job printing metrics."""

    def poll(self):
        log = self.request.run_dir / "logs" / "rank-0.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("a") as f:
            f.write("step\n")
        return super().poll()


def _clock():
    t = [0.0]

    def now() -> float:
        t[0] += 1.0
        return t[0]

    return now


def _run(ledger, tmp_path, make, run_id):
    job = make_job(ledger, tmp_path, run_id=run_id)
    executor = ScriptedExecutor([make])
    deps = make_deps(ledger, ScriptedProvider(), executor, progress_poll_s=2.0, clock=_clock())
    result = Controller(job, deps).run()
    cluster = ledger.attempts(run_id)[0].cluster
    return result, ledger.last_heartbeat(cluster=cluster)


def test_a_job_writing_output_beats_for_its_cluster(ledger, tmp_path):
    result, beat = _run(ledger, tmp_path, lambda: Chatty(Outcome.SUCCEEDED, polls_before_end=8), "r-chatty")
    assert result.state == "succeeded"
    assert beat is not None


def test_a_silent_job_does_not_beat(ledger, tmp_path):
    result, beat = _run(ledger, tmp_path, lambda: ScriptedExecution(Outcome.SUCCEEDED, polls_before_end=8), "r-silent")
    assert result.state == "succeeded"
    assert beat is None
