"""The controller against the in-memory FakeProvider — the fake that the provider contract suite
(tests/providers/test_contract.py) checks against moto and the GCE server — so recovery is shown
on provider behaviour that cannot drift from the real ones."""

from __future__ import annotations

from launcher.controller.controller import Controller
from launcher.executors.base import Outcome
from launcher.providers.fake import FakeProvider
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor


def test_a_reclaimed_spot_node_is_noticed_and_the_run_recovers_on_the_next_offer(ledger, tmp_path):
    fake = FakeProvider(regions=("r1", "r2", "r3"))

    def reclaim_first_attempt(request):
        if request.attempt == 1:  # the cloud takes the node back while the job runs
            (inst,) = fake.list_instances({"run-id": request.run_id})
            fake.preempt(inst.instance_id)

    executor = ScriptedExecutor(
        [lambda: ScriptedExecution(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)],
        on_start=reclaim_first_attempt,
    )
    job = make_job(ledger, tmp_path)
    result = Controller(job, make_deps(ledger, fake, executor, notice_interval_s=0.0)).run()

    assert result.state == "succeeded"
    attempts = ledger.attempts(job.run_id)
    assert [(a.region, a.end_reason) for a in attempts] == [("r1", "preempted"), ("r2", "completed")]
    (notice,) = ledger.events(job.run_id, kind="preemption")
    assert "reclaimed (spot)" in notice.data["reason"]
    assert executor.started[0].notified  # the job got its notice (SIGTERM) to checkpoint
    # every node the run held is gone from the cloud afterwards
    assert fake.list_instances({"run-id": job.run_id}) == []
    assert {c.state for c in ledger.clusters(run_id=job.run_id)} == {"terminated"}
