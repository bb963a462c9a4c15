"""The controller's state machine against a real (SQLite) ledger with scripted provider and
executor: transitions, ledger-before-action, recovery, restarts, cancel, resume, budget stop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from launcher.controller.controller import Controller
from launcher.controller.recovery import recovery_policy
from launcher.policies.recovery import NextOfferPolicy
from launcher.controller.states import TRANSITIONS, can_transition
from launcher.errors import UnknownNameError
from launcher.executors.base import Outcome
from launcher.ledger import Ledger
from launcher.policies.base import RecoveryContext
from tests.controller.conftest import OFFERS, make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider, scored


def _states(ledger, run_id):
    return [e.data["to"] for e in ledger.events(run_id, kind="state_change")]


def _ok():
    return ScriptedExecution(Outcome.SUCCEEDED)


def test_happy_path_transitions_attempt_and_cluster(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    provider, executor = ScriptedProvider(), ScriptedExecutor([_ok])
    result = Controller(job, make_deps(ledger, provider, executor)).run()
    assert result.state == "succeeded" and result.end_reason == "completed" and result.attempts == 1
    assert _states(ledger, job.run_id) == ["provisioning", "running", "succeeded"]
    (a,) = ledger.attempts(job.run_id)
    assert (a.region, a.price_usd_per_hour, a.end_reason, a.exit_code) == ("r1", 1.0, "completed", 0)
    assert a.ended_at is not None
    (c,) = ledger.clusters(run_id=job.run_id)
    assert c.state == "terminated" and provider.terminated == [c.name]
    assert provider.provisioned[0].tags["run-id"] == job.run_id and provider.provisioned[0].tags["project"] == "p"
    assert [e.kind for e in ledger.events(job.run_id)].count("controller") == 1
    assert ledger.last_heartbeat(run_id=job.run_id) is not None


def test_every_transition_is_in_the_ledger_before_it_takes_effect(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    seen = {}

    def at_provision(request):
        seen["provision"] = (ledger.get_run(job.run_id).state, [a.cluster for a in ledger.open_attempts(run_id=job.run_id)],
                             ledger.get_cluster(request.cluster).state)  # fmt: skip

    def at_start(request):
        seen["start"] = ledger.get_run(job.run_id).state

    provider = ScriptedProvider(on_provision=at_provision)
    executor = ScriptedExecutor([_ok], on_start=at_start)
    Controller(job, make_deps(ledger, provider, executor)).run()
    state, open_clusters, cluster_state = seen["provision"]
    assert state == "provisioning" and open_clusters == [provider.provisioned[0].cluster]
    assert cluster_state == "provisioning"
    assert seen["start"] == "running"


def test_preemption_recovers_on_the_next_offer(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    provider = ScriptedProvider()
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.PREEMPTED, exit_code=75), _ok])
    result = Controller(job, make_deps(ledger, provider, executor)).run()
    assert result.state == "succeeded"
    assert _states(ledger, job.run_id) == ["provisioning", "running", "recovering", "provisioning", "running", "succeeded"]
    a1, a2 = ledger.attempts(job.run_id)
    assert (a1.region, a1.end_reason, a1.exit_code) == ("r1", "preempted", 75)
    assert (a2.region, a2.end_reason) == ("r2", "completed")
    rec = ledger.events(job.run_id, kind="recovery")
    assert rec and rec[0].data["offer"]["region"] == "r2" and rec[0].data["policy"] == "next-offer"
    assert len(ledger.clusters(run_id=job.run_id)) == 2
    assert all(c.state == "terminated" for c in ledger.clusters(run_id=job.run_id))


def test_provider_notice_is_delivered_to_the_job_and_recorded(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    provider = ScriptedProvider(notices={0: 0.0})
    executor = ScriptedExecutor([lambda: ScriptedExecution(None), _ok])
    result = Controller(job, make_deps(ledger, provider, executor)).run()
    assert result.state == "succeeded"
    assert executor.started[0].notified and not executor.started[1].notified
    (p,) = ledger.events(job.run_id, kind="preemption")
    assert p.attempt_id == ledger.attempts(job.run_id)[0].attempt_id
    assert ledger.attempts(job.run_id)[0].end_reason == "preempted"


def test_user_failures_are_retried_on_the_same_offer_up_to_max_restarts(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="run: x\nlauncher: {max_restarts: 2}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.FAILED, exit_code=3)])
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run()
    assert result.state == "failed" and result.end_reason == "failed" and result.exit_code == 3
    attempts = ledger.attempts(job.run_id)
    assert len(attempts) == 3  # first try + 2 restarts
    assert {a.region for a in attempts} == {"r1"} and {a.end_reason for a in attempts} == {"failed"}


def test_a_failure_then_success_within_max_restarts(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="run: x\nlauncher: {max_restarts: 1}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.FAILED, exit_code=1), _ok])
    assert Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run().state == "succeeded"


def test_setup_failure_is_reported_and_not_retried(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="setup: x\nrun: y\nlauncher: {max_restarts: 5}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SETUP_FAILED, exit_code=7)])
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run()
    assert (result.state, result.end_reason, result.exit_code, result.attempts) == ("failed", "setup_failed", 7, 1)
    assert ledger.attempts(job.run_id)[0].end_reason == "setup_failed"


def test_provision_failure_moves_to_the_next_offer(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    provider = ScriptedProvider(fail_regions={"r1"})
    result = Controller(job, make_deps(ledger, provider, ScriptedExecutor([_ok]))).run()
    assert result.state == "succeeded"
    a1, a2 = ledger.attempts(job.run_id)
    assert (a1.region, a1.end_reason) == ("r1", "provision_failed") and (a2.region, a2.end_reason) == ("r2", "completed")
    assert ledger.get_cluster(a1.cluster).state == "terminated"


def test_cancel_request_stops_the_job_and_tears_down(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    provider = ScriptedProvider()
    controller = None

    def start_then_cancel(request):
        controller.request_cancel()

    executor = ScriptedExecutor([lambda: ScriptedExecution(None)], on_start=start_then_cancel)
    controller = Controller(job, make_deps(ledger, provider, executor))
    result = controller.run()
    assert result.state == "cancelled"
    assert executor.started[0].stopped
    assert ledger.attempts(job.run_id)[0].end_reason == "cancelled"
    assert _states(ledger, job.run_id)[-2:] == ["stopping", "cancelled"]
    assert provider.terminated


def test_stopping_written_by_another_process_is_honored(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    other = Ledger()  # as `launcher down` in another process would

    def down_meanwhile(request):
        other.set_run_state(job.run_id, "stopping", reason="cancelled", expected_from="running")

    executor = ScriptedExecutor([lambda: ScriptedExecution(None)], on_start=down_meanwhile)
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run()
    other.close()
    assert result.state == "cancelled" and executor.started[0].stopped


def test_resume_abandons_the_open_attempt_and_continues(ledger, tmp_path):
    from launcher.ledger import NewAttempt

    job = make_job(ledger, tmp_path)
    # What a controller killed with -9 mid-run leaves behind:
    ledger.set_run_state(job.run_id, "provisioning", expected_from="pending")
    ledger.add_attempt(job.run_id, NewAttempt.from_offer(OFFERS[0], cluster=f"{job.run_id}-c1"))
    ledger.set_run_state(job.run_id, "running", expected_from="provisioning")
    provider, executor = ScriptedProvider(), ScriptedExecutor([_ok])
    result = Controller(job, make_deps(ledger, provider, executor), mode="resume").run()
    assert result.state == "succeeded"
    a1, a2 = ledger.attempts(job.run_id)
    assert a1.end_reason == "abandoned" and a2.end_reason == "completed" and a2.seq == 2
    assert "recovering" in _states(ledger, job.run_id)
    assert [e.data["mode"] for e in ledger.events(job.run_id, kind="controller")] == ["resume"]


def test_run_already_ended_is_left_alone(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    ledger.set_run_state(job.run_id, "cancelled", reason="cancelled", expected_from="pending")
    executor = ScriptedExecutor([_ok])
    assert Controller(job, make_deps(ledger, ScriptedProvider(), executor)).run().state == "cancelled"
    assert executor.started == []


def test_budget_spent_stops_the_run(tmp_path):
    t = [datetime(2026, 11, 1, tzinfo=UTC)]

    def clock():  # every ledger call advances the ledger's clock by 10 minutes
        t[0] += timedelta(minutes=10)
        return t[0]

    with Ledger(now=clock) as led:
        job = make_job(led, tmp_path, spec_text="run: x\nlauncher: {budget_usd: 0.5}\n")
        executor = ScriptedExecutor([lambda: ScriptedExecution(None)])
        result = Controller(job, make_deps(led, ScriptedProvider(), executor)).run()
        assert result.state == "budget_stopped"
        assert executor.started[0].stopped
        assert led.events(job.run_id, kind="budget_stop")
        assert led.attempts(job.run_id)[0].end_reason == "budget_stop"


def test_transition_table():
    assert can_transition("pending", "provisioning") and can_transition("running", "recovering")
    assert not can_transition("succeeded", "running") and not can_transition("pending", "running")
    assert not can_transition("running", "provisioning")
    for src, dsts in TRANSITIONS.items():
        assert src not in ("succeeded", "failed", "cancelled", "budget_stopped")
        assert dsts


def test_next_offer_policy():
    # The one NextOfferPolicy (launcher.policies.recovery): down the ranking, wrapping around; a
    # region that preempted us twice goes last. (This test pinned a second, controller-local copy
    # that skipped a region after one preemption; the two were merged into the registry's rule.)
    ranked = tuple(scored(o, i + 1) for i, o in enumerate(OFFERS))
    p = NextOfferPolicy()
    assert p.choose(RecoveryContext(ranked, None)).offer == ranked[0]
    assert p.choose(RecoveryContext(ranked, ranked[0], tried=(ranked[0],))).offer == ranked[1]
    # one preemption is not a pattern; two move the region to the back
    assert p.choose(RecoveryContext(ranked, ranked[0], preempted_regions=("r2",))).offer == ranked[1]
    assert p.choose(RecoveryContext(ranked, ranked[0], preempted_regions=("r2", "r2"))).offer == ranked[2]
    # after the last offer: wrap to the first
    assert p.choose(RecoveryContext(ranked, ranked[2], tried=ranked)).offer == ranked[0]


def test_unknown_recovery_policy_is_bad_input():
    with pytest.raises(UnknownNameError):
        recovery_policy("nxt-offer")


class _WaitOncePolicy(NextOfferPolicy):
    name = "wait-once"

    def __init__(self):
        super().__init__()
        self.calls = 0

    def choose(self, ctx):
        from launcher.policies.base import RecoveryDecision

        self.calls += 1
        if self.calls == 1:
            return RecoveryDecision(None, wait_seconds=0.01, reason="capacity may come back")
        return super().choose(ctx)


def test_policy_may_ask_to_wait_before_the_next_placement(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    policy = _WaitOncePolicy()
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.PREEMPTED, exit_code=75), _ok])
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor, policy=policy)).run()
    assert result.state == "succeeded" and policy.calls == 2
    waits = [e.data for e in ledger.events(job.run_id, kind="recovery") if e.data.get("decision") == "wait"]
    assert waits == [{"decision": "wait", "seconds": 0.01, "reason": "capacity may come back"}]


def test_deadline_aware_policy_from_the_registry_gets_a_decision_state(ledger, tmp_path):
    policy = recovery_policy(None, has_deadline=True)
    assert policy.name == "deadline-aware"
    seen = []
    original = policy.choose

    def spy(ctx):
        seen.append(ctx.state)
        return original(ctx)

    policy.choose = spy
    job = make_job(ledger, tmp_path, spec_text="run: x\nlauncher: {deadline: 6h, expected_hours: 1}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.PREEMPTED, exit_code=75), _ok])
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor, policy=policy)).run()
    assert result.state == "succeeded"
    (state,) = seen
    assert state.deadline_hours == 6 and state.work_total_hours == 1.0 and state.preemptions == 1
    assert state.current.value == "none" and 0 <= state.work_done_hours < 0.1
    assert state.spot_price_usd_per_hour == 1.0 and state.on_demand_price_usd_per_hour is None


def test_deadline_aware_recovery_past_the_estimate_places_at_once_instead_of_waiting_as_done(ledger, tmp_path):
    # The job ran longer than the plan's estimate (1 h) before its node was lost: the estimate is
    # spent but the job is not done, so the policy must place it again, not wait for "done".
    now = [0.0]

    def clock() -> float:
        now[0] += 600.0  # every look at the clock is 10 min later: the attempt runs past 1 h
        return now[0]

    job = make_job(ledger, tmp_path, spec_text="run: x\nlauncher: {deadline: 12h, expected_hours: 1}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.NODE_LOST, exit_code=None, polls_before_end=3), _ok])
    policy = recovery_policy(None, has_deadline=True)
    result = Controller(job, make_deps(ledger, ScriptedProvider(), executor, policy=policy, clock=clock)).run()
    assert result.state == "succeeded"
    recs = [e.data for e in ledger.events(job.run_id, kind="recovery")]
    assert recs and all(r.get("decision") != "wait" for r in recs), recs
    assert [a.end_reason for a in ledger.attempts(job.run_id)] == ["node_lost", "completed"]


def test_image_runtime_is_recorded(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="resources: {image_id: 'docker:ubuntu:22.04'}\nrun: x\n")
    Controller(job, make_deps(ledger, ScriptedProvider(), ScriptedExecutor([_ok]))).run()
    (e,) = ledger.events(job.run_id, kind="image")
    assert e.data == {"image": "docker:ubuntu:22.04", "image_runtime": "host"}


@pytest.mark.parametrize("error", ["tool", "config"])
def test_a_cloud_that_cannot_work_at_all_is_skipped_entirely(ledger, tmp_path, error):
    from launcher.errors import BadInputError, ToolMissingError
    from tests.controller.doubles import offer

    offers = [offer("r1", 1.0, cloud="broken"), offer("r2", 1.5, cloud="broken"), offer("r3", 2.0, cloud="fake")]
    job = make_job(ledger, tmp_path, offers=offers)

    class NoTool(ScriptedProvider):
        def provision(self, request):
            self.provisioned.append(request)
            if error == "tool":
                raise ToolMissingError("the Pulumi CLI is not installed")
            raise BadInputError("cannot deploy without --ssh-cidr")

    broken, fine = NoTool(), ScriptedProvider()
    deps = make_deps(ledger, fine, ScriptedExecutor([_ok]))
    deps.provider_for = lambda cloud: broken if cloud == "broken" else fine
    assert Controller(job, deps).run().state == "succeeded"
    assert [a.region for a in ledger.attempts(job.run_id)] == ["r1", "r3"]  # r2 (same cloud) never tried
    assert len(broken.provisioned) == 1


def test_preemption_notices_are_polled_at_the_providers_pace(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    calls = []

    class Counting(ScriptedProvider):
        def preemption_notice(self, handle, running_s):
            calls.append(running_s)
            return None

    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SUCCEEDED, polls_before_end=200)])
    deps = make_deps(ledger, Counting(), executor)
    deps.notice_interval_s = 3600.0  # a cloud API call: not on every poll
    assert Controller(job, deps).run().state == "succeeded"
    assert len(calls) == 1


def test_executor_release_runs_before_the_provider_terminates(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    order = []

    class Releasing(ScriptedExecutor):
        def release(self, handle):
            order.append(("release", handle.cluster))

    class Terminating(ScriptedProvider):
        def terminate(self, handle):
            order.append(("terminate", handle.cluster))

    Controller(job, make_deps(ledger, Terminating(), Releasing([_ok]))).run()
    cluster = f"{job.run_id}-c1"
    assert order == [("release", cluster), ("terminate", cluster)]


def test_cluster_request_carries_spec_and_launch_settings(ledger, tmp_path):
    from dataclasses import replace

    job = make_job(ledger, tmp_path, spec_text="num_nodes: 2\nresources: {image_id: 'docker:img', disk_size: 200}\nrun: x\n")
    job = replace(job, ssh_allowed_cidr="203.0.113.7/32")
    provider = ScriptedProvider()
    Controller(job, make_deps(ledger, provider, ScriptedExecutor([_ok]))).run()
    (req,) = provider.provisioned
    assert (req.num_nodes, req.image_id, req.disk_size_gib, req.ssh_allowed_cidr) == (2, "docker:img", 200, "203.0.113.7/32")
    assert req.offer == OFFERS[0] and req.cluster == f"{job.run_id}-c1"


def test_the_tracking_session_is_a_run_observer():
    from launcher.controller.observer import RunObserver
    from launcher.tracking.session import TrackingSession

    assert issubclass(TrackingSession, RunObserver)


def test_attempt_records_the_providers_billing_account(ledger, tmp_path):
    from launcher.providers.base import BillingAccountRef

    class AccountedProvider(ScriptedProvider):  # a provider that knows its cloud account
        def billing_account(self):
            return BillingAccountRef(id="123456789012", name="research")

    job = make_job(ledger, tmp_path)
    Controller(job, make_deps(ledger, AccountedProvider(), ScriptedExecutor([_ok]))).run()
    (a,) = ledger.attempts(job.run_id)
    assert (a.billing_account_id, a.billing_account_name) == ("123456789012", "research")
    job2 = make_job(ledger, tmp_path, run_id="r-test-2")
    Controller(job2, make_deps(ledger, ScriptedProvider(), ScriptedExecutor([_ok]))).run()
    (b,) = ledger.attempts(job2.run_id)
    assert (b.billing_account_id, b.billing_account_name) == (None, None)  # the provider cannot tell
