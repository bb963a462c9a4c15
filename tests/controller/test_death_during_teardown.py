"""A controller that dies while it tears a cluster down (minutes on a cloud) after the job ended:
the next controller (`launch --resume`) closes the attempt as the job ended, from the outcome the
dead one recorded before the teardown, instead of `abandoned`, and does not run a finished job
again. The death is a BaseException raised inside the provider's terminate: nothing after it in
that controller runs, as with kill -9."""

from __future__ import annotations

import pytest

from launcher.controller.controller import Controller
from launcher.executors.base import Outcome
from launcher.ledger import Ledger
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider


class Killed(BaseException):
    """The controller's process ends here."""


class DiesInFirstTeardown(ScriptedProvider):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def terminate(self, handle):
        self.calls += 1
        if self.calls == 1:
            raise Killed
        super().terminate(handle)


@pytest.mark.parametrize(
    ("outcome", "exit_code", "end_reason", "run_state"),
    [
        (Outcome.SUCCEEDED, 0, "completed", "succeeded"),
        (Outcome.SETUP_FAILED, 2, "setup_failed", "failed"),
    ],
)
def test_a_job_that_ended_is_not_run_again_after_its_controller_died_in_the_teardown(
    tmp_path, outcome, exit_code, end_reason, run_state
):
    provider = DiesInFirstTeardown()
    executor = ScriptedExecutor([lambda: ScriptedExecution(outcome, exit_code=exit_code)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job = make_job(led, tmp_path)
        with pytest.raises(Killed):
            Controller(job, make_deps(led, provider, executor)).run()
        (left,) = led.attempts(job.run_id)
        assert left.ended_at is None and led.get_run(job.run_id).state == "running"
        died_at = led.now()

        result = Controller(job, make_deps(led, provider, executor)).run()

        assert result.state == run_state
        assert len(executor.started) == 1  # the job ran once
        (a,) = led.attempts(job.run_id)
        assert (a.end_reason, a.exit_code) == (end_reason, exit_code)
        assert a.ended_at is not None and a.started_at <= a.ended_at <= died_at  # billed to when the job ended
        (closed,) = led.events(job.run_id, kind="attempt_closed")
        assert closed.data["from"].startswith("its controller") and closed.data["end_reason"] == end_reason
        (c,) = led.clusters(run_id=job.run_id)
        assert c.state == "terminated" and provider.terminated == [c.name]


def test_without_the_record_the_attempt_is_abandoned_and_the_job_runs_again(tmp_path):
    """The behaviour the record replaces, kept for a record that could not be written."""
    import shutil

    provider = DiesInFirstTeardown()
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job = make_job(led, tmp_path)
        with pytest.raises(Killed):
            Controller(job, make_deps(led, provider, executor)).run()
        shutil.rmtree(job.run_dir / "exits")

        result = Controller(job, make_deps(led, provider, executor)).run()

        assert result.state == "succeeded"
        assert [a.end_reason for a in led.attempts(job.run_id)] == ["abandoned", "completed"]
        assert len(executor.started) == 2
