"""Failures that retrying cannot fix end the run at once, with the real local executor: a missing
command (exit 127 from the job's shell) and an image the real podman does not have. `max_restarts`
counts only the job's own failures."""

from __future__ import annotations

import shutil

import pytest

from launcher.controller.controller import Controller
from launcher.executors.base import ExecResult, Outcome
from launcher.controller.recovery import unretryable
from launcher.executors.local import LocalExecutor
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider


def _reasons(ledger, run_id):
    return [a.end_reason for a in ledger.attempts(run_id)]


def _fail_detail(ledger, run_id) -> str:
    return next(e.data["detail"] for e in ledger.events(run_id, kind="state_change") if e.data.get("to") == "failed")


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (ExecResult(Outcome.FAILED, 127, "run", detail="rank 0 run exited with 127"), "rank 0 run exited with 127"),
        (ExecResult(Outcome.FAILED, 126, "run", image_runtime="podman"), "exit 126: the command cannot be executed"),
        (ExecResult(Outcome.FAILED, 125, "run", image_runtime="podman"), "exit 125: the container runtime failed"),
        (ExecResult(Outcome.FAILED, 1, "run", detail="x", retryable=False), "x"),
        (ExecResult(Outcome.FAILED, 125, "run"), None),  # on the host 125 is the job's own code
        (ExecResult(Outcome.FAILED, 1, "run", image_runtime="podman"), None),
        (ExecResult(Outcome.PREEMPTED, 127, "run"), None),
    ],
)
def test_which_failures_are_not_the_jobs_own(result, why):
    assert unretryable(result) == why


def test_a_missing_command_is_not_retried(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="run: launcher-no-such-command-xyz --epochs 1\nlauncher: {max_restarts: 3}\n")
    result = Controller(job, make_deps(ledger, ScriptedProvider(), LocalExecutor(podman=False))).run()
    assert (result.state, result.attempts, result.exit_code) == ("failed", 1, 127)
    assert _reasons(ledger, job.run_id) == ["failed"]
    assert "not retried" in _fail_detail(ledger, job.run_id) and "command was not found" in _fail_detail(ledger, job.run_id)


def test_the_jobs_own_failures_are_retried_up_to_max_restarts(ledger, tmp_path):
    job = make_job(ledger, tmp_path, spec_text="run: exit 3\nlauncher: {max_restarts: 2}\n")
    result = Controller(job, make_deps(ledger, ScriptedProvider(), LocalExecutor(podman=False))).run()
    assert (result.state, result.attempts, result.exit_code) == ("failed", 3, 3)


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed on this machine")
def test_an_image_the_runtime_lacks_is_one_failed_attempt_with_the_runtimes_reason(ledger, tmp_path):
    spec = "resources: {image_id: 'docker:localhost/launcher-no-such-image:0'}\nrun: echo never\nlauncher: {max_restarts: 3}\n"
    job = make_job(ledger, tmp_path, spec_text=spec)
    result = Controller(job, make_deps(ledger, ScriptedProvider(), LocalExecutor(podman=shutil.which("podman")))).run()
    assert (result.state, result.attempts, result.exit_code) == ("failed", 1, 125)
    assert "podman: image 'localhost/launcher-no-such-image:0' is not in its local images" in _fail_detail(ledger, job.run_id)
    (e,) = ledger.events(job.run_id, kind="image")
    assert e.data == {"image": "docker:localhost/launcher-no-such-image:0", "image_runtime": "container"}


def test_the_image_digest_is_recorded_with_the_image(ledger, tmp_path):
    def with_digest():
        ex = ScriptedExecution(Outcome.SUCCEEDED)
        ex.image_digest = "sha256:" + "ab" * 32
        return ex

    job = make_job(ledger, tmp_path, spec_text="resources: {image_id: {r1: 'docker:img:1', r2: 'docker:img:2'}}\nrun: x\n")
    Controller(job, make_deps(ledger, ScriptedProvider(), ScriptedExecutor([with_digest]))).run()
    (e,) = ledger.events(job.run_id, kind="image")
    assert e.data == {"image": "docker:img:1", "image_runtime": "host", "image_digest": "sha256:" + "ab" * 32}
