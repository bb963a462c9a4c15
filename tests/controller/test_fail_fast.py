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
