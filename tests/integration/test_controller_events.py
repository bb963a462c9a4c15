"""What the controller writes to the ledger about a job it cannot see into: the checkpoints the
job saved (on the attempt that saved them, found in its checkpoint store) and, on a replacement
attempt, when the job ran again and the restart overhead paid. The cost report prices
preemption loss and restart overhead from these events."""

from __future__ import annotations

from launcher.checkpoint import CheckpointStore
from launcher.controller.controller import Controller
from launcher.executors.base import Outcome
from tests.controller.conftest import ledger, make_deps, make_job  # noqa: F401
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider


def test_checkpoints_and_running_again_are_recorded_per_attempt(ledger, tmp_path):  # noqa: F811
    job = make_job(ledger, tmp_path)
    store = CheckpointStore(job.checkpoint_dir)
    store.save(5, {"w": b"from an earlier run"}, metadata={"reason": "interval"})  # not this run's news
    saves = iter([(10, "preemption"), (20, "final")])

    def job_saves(_request):  # each attempt's job writes one checkpoint while it runs
        step, reason = next(saves)
        store.save(step, {"w": b"x" * step}, metadata={"reason": reason})

    executor = ScriptedExecutor(
        [lambda: ScriptedExecution(Outcome.PREEMPTED, exit_code=75), lambda: ScriptedExecution(Outcome.SUCCEEDED)],
        on_start=job_saves,
    )
    assert Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run().state == "succeeded"
    a1, a2 = ledger.attempts(job.run_id)
    ckpts = [(e.attempt_id, e.data["step"], e.data["size_bytes"], e.data["reason"])
             for e in ledger.events(job.run_id, kind="checkpoint")]  # fmt: skip
    assert ckpts == [(a1.attempt_id, 10, 10, "preemption"), (a2.attempt_id, 20, 20, "final")]
    again = [e for e in ledger.events(job.run_id, kind="recovery") if e.data.get("running_again")]
    assert [e.attempt_id for e in again] == [a2.attempt_id]
    assert again[0].data["restart_overhead_seconds"] >= 0


def test_a_first_run_after_failed_provisions_is_not_a_recovery(ledger, tmp_path):  # noqa: F811
    job = make_job(ledger, tmp_path)
    provider = ScriptedProvider(fail_regions={"r1"})
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    result = Controller(job, make_deps(ledger, provider, executor)).run()
    assert result.state == "succeeded"
    assert [a.end_reason for a in ledger.attempts(job.run_id)] == ["provision_failed", "completed"]
    assert not [e for e in ledger.events(job.run_id, kind="recovery") if e.data.get("running_again")]
    assert ledger.events(job.run_id, kind="checkpoint") == []
