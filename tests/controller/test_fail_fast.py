"""A run whose every offer's cloud fails as a whole (missing tool, credentials, settings) ends at
once instead of waiting for capacity that cannot come."""

from __future__ import annotations

from launcher.controller.controller import Controller
from launcher.errors import ToolMissingError
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecutor, ScriptedProvider


def _no_tool(request):
    raise ToolMissingError("`pulumi up` needs the Pulumi CLI, which is not installed")


def test_every_cloud_unusable_fails_at_once_without_waiting(ledger, tmp_path):
    job = make_job(ledger, tmp_path)
    slept: list[float] = []
    deps = make_deps(ledger, ScriptedProvider(on_provision=_no_tool), ScriptedExecutor([]))
    deps.sleep = slept.append
    result = Controller(job, deps).run()
    assert (result.state, result.end_reason) == ("failed", "provision_failed")
    attempts = ledger.attempts(job.run_id)
    assert [a.end_reason for a in attempts] == ["provision_failed"]  # the other offers share the cloud
    waits = [e for e in ledger.events(job.run_id, kind="recovery") if e.data.get("decision") == "wait"]
    assert waits == [] and slept == []
    failed = [e for e in ledger.events(job.run_id, kind="state_change") if e.data.get("to") == "failed"]
    assert "no usable offer left: fake cannot be used" in failed[0].data["detail"]


def test_a_wait_is_announced_and_bounded(ledger, tmp_path):
    """A policy that keeps waiting: each wait says what for and when the next check is, and the
    run gives up once the total wait passes max_wait."""
    from launcher.policies.base import RecoveryDecision, RecoveryPolicy

    class Waits(RecoveryPolicy):
        name = "waits"

        def choose(self, ctx):
            return RecoveryDecision(None, wait_seconds=600.0, reason="no spot capacity in us-east-1")

    job = make_job(ledger, tmp_path)
    lines: list[str] = []
    deps = make_deps(ledger, ScriptedProvider(fail_regions={"r1"}), ScriptedExecutor([]), policy=Waits(), notify=lines.append,
                     max_wait_s=1500.0)  # fmt: skip
    deps.poll_interval_s = 1.0  # the watchful sleep moves in steps of 4 poll intervals
    t = [0.0]
    deps.clock = lambda: t[0]
    deps.sleep = lambda s: t.__setitem__(0, t[0] + s)
    result = Controller(job, deps).run()
    assert (result.state, result.end_reason) == ("failed", "provision_failed")
    waits = [ln for ln in lines if ln.startswith("waiting:")]
    # 600 s + 600 s fit in 1500 s; a third 600 s would not: two waits, then give up.
    assert len(waits) == 2
    assert "no spot capacity in us-east-1; next check in 600s" in waits[0]
    assert "gives up after 25 more min" in waits[0] and "gives up after 15 more min" in waits[1]
