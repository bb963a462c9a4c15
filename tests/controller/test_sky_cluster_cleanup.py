"""Cleanup of SkyPilot clusters on declared infra (Slurm, Kubernetes, SSH pools) after a controller
died, through `launch --resume`, `launcher down` and `launcher doctor`, and the bounded wait for
room on such a cluster.

SkyPilot is played by `FakeSky` (a dict of clusters and their jobs) behind an executor with the
real executor's cleanup surface (`release`, `leftovers`, `down`, `ended_job`); the real SkyPilot
on a real Slurm cluster does the same in tests/slurm (kill -9 and resume, a job queued behind
another). The controller's death is a BaseException raised while it watches the job: nothing
after it in that controller runs, as with kill -9.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from launcher.controller.cleanup import down_target
from launcher.controller.controller import Controller
from launcher.controller.doctor import NEEDS_YOU, OK, REPAIRED, _check_sky_clusters
from launcher.errors import ProviderError
from launcher.executors.base import ExecResult, Outcome
from launcher.executors.job_status import EndedJob
from launcher.executors.sky_cluster import sky_cluster_name
from launcher.ledger import Ledger
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider, offer

SLURM = [offer("team", 0.0, cloud="slurm", spot=False)]


class Killed(BaseException):
    """The controller's process ends here."""


@dataclass
class FakeSky:
    clusters: dict[str, str] = field(default_factory=dict)  # name -> SkyPilot job status of its job
    downs: list[str] = field(default_factory=list)
    fail_down: bool = False


@dataclass
class SkyLikeExecutor(ScriptedExecutor):
    """ScriptedExecutor whose attempts also appear in FakeSky, with SkyClusterExecutor's cleanup."""

    sky: FakeSky = field(default_factory=FakeSky)

    def start(self, request, handle):
        execution = super().start(request, handle)
        self.sky.clusters[sky_cluster_name(handle)] = "RUNNING"
        return execution

    def release(self, handle) -> None:
        self.down([sky_cluster_name(handle)])

    def leftovers(self, names=None):
        return {n: "UP" for n in self.sky.clusters if names is None or n in names}

    def down(self, names):
        if self.sky.fail_down:
            raise ProviderError(f"SkyPilot still lists {names[0]} (UP) after `sky down`")
        gone = [n for n in names if self.sky.clusters.pop(n, None) is not None]
        self.sky.downs += gone
        return gone

    def ended_job(self, handle, run_dir, attempt, num_nodes, secrets=()):
        status = self.sky.clusters.get(sky_cluster_name(handle))
        if status is None:
            return "gone", None
        if status == "SUCCEEDED":
            return status, EndedJob(Outcome.SUCCEEDED, 0, "SkyPilot job SUCCEEDED", source="SkyPilot's job table")
        if status.startswith("FAILED:"):  # "FAILED:<exit code>"
            code = int(status.split(":")[1])
            return "FAILED", EndedJob(Outcome.FAILED, code, f"SkyPilot job FAILED (exit {code})", source="SkyPilot's job table")
        return status, None


@dataclass
class DiesWhileWatched(ScriptedExecution):
    """Runs until the controller has polled it a few times, then the controller dies."""

    def poll(self):
        self._polls += 1
        if self._polls > 3:
            raise Killed
        return None


def _killed_mid_job(led, tmp_path, executor):
    job = make_job(led, tmp_path, offers=SLURM)
    with pytest.raises(Killed):
        Controller(job, make_deps(led, ScriptedProvider(), executor)).run()
    assert led.get_run(job.run_id).state == "running"
    (c,) = led.clusters(run_id=job.run_id)
    assert c.provider == "slurm" and c.state == "up"
    assert list(executor.sky.clusters) == [sky_cluster_name_of(c.name)]
    return job, c


def sky_cluster_name_of(cluster: str) -> str:
    return "gl-" + cluster.lower()


def test_resume_adopts_a_job_that_finished_while_nobody_watched(tmp_path):
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c = _killed_mid_job(led, tmp_path, executor)
        executor.sky.clusters[sky_cluster_name_of(c.name)] = "SUCCEEDED"  # the job ended on its own

        result = Controller(job, make_deps(led, ScriptedProvider(), executor)).run()

        assert (result.state, result.end_reason, result.attempts) == ("succeeded", "completed", 1)
        assert len(executor.started) == 1, "adopted, not started over"
        (a,) = led.attempts(job.run_id)
        assert a.end_reason == "completed"
        (closed,) = led.events(job.run_id, kind="attempt_closed")
        assert closed.data["from"] == "SkyPilot's job table"
        assert executor.sky.clusters == {} and executor.sky.downs == [sky_cluster_name_of(c.name)]
        assert led.get_cluster(c.name).state == "terminated"


@pytest.mark.parametrize("code,retried", [(127, False), (126, False), (3, True)])
def test_resume_does_not_retry_a_command_that_could_not_run_while_nobody_watched(tmp_path, code, retried):
    """The live controller's rule, applied to a job that ended while its controller was dead:
    126/127 (the command cannot be executed / was not found) fail the run at once; the job's own
    failure is retried within max_restarts, as it would have been."""
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c = _killed_mid_job(led, tmp_path, executor)
        executor.sky.clusters[sky_cluster_name_of(c.name)] = f"FAILED:{code}"

        result = Controller(job, make_deps(led, ScriptedProvider(), executor)).run()

        if retried:
            assert (result.state, result.attempts, len(executor.started)) == ("succeeded", 2, 2)
            assert [a.end_reason for a in led.attempts(job.run_id)] == ["failed", "completed"]
        else:
            assert (result.state, result.attempts, len(executor.started)) == ("failed", 1, 1)
            (a,) = led.attempts(job.run_id)
            assert (a.end_reason, a.exit_code) == ("failed", code)
            (failed,) = [e for e in led.events(job.run_id, kind="state_change") if e.data.get("to") == "failed"]
            assert "not retried" in failed.data["detail"], failed.data


def test_resume_tears_down_a_job_still_running_before_the_next_attempt(tmp_path):
    seen_at_start: list[dict] = []
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c = _killed_mid_job(led, tmp_path, executor)
        executor.on_start = lambda request: seen_at_start.append(dict(executor.sky.clusters))

        result = Controller(job, make_deps(led, ScriptedProvider(), executor)).run()

        assert (result.state, result.attempts) == ("succeeded", 2)
        assert seen_at_start == [{}], "the dead attempt's SkyPilot cluster is gone before the next one starts"
        assert [a.end_reason for a in led.attempts(job.run_id)] == ["abandoned", "completed"]
        decision = [e.data for e in led.events(job.run_id, kind="attempt_closed") if "sky_job" in e.data]
        assert decision == [{"attempt": 1, "sky_job": "RUNNING", "decision": "tear down; resume from the last checkpoint"}]
        assert executor.sky.clusters == {}


def test_a_failed_sky_down_leaves_the_cluster_terminating_and_down_retries_it(tmp_path):
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None)])
    release_for = lambda p: executor if p == "slurm" else None  # noqa: E731
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c = _killed_mid_job(led, tmp_path, executor)
        executor.sky.fail_down = True
        with pytest.raises(ProviderError, match="still lists"):
            Controller(job, make_deps(led, ScriptedProvider(), executor)).run()
        assert led.get_cluster(c.name).state == "terminating", "never marked gone while SkyPilot may hold it"
        assert any("release_error" in e.data for e in led.events(job.run_id, kind="teardown"))

        executor.sky.fail_down = False
        r = down_target(led, c.name, lambda cloud: ScriptedProvider(), wait_s=0.1, release_for=release_for)
        assert led.get_cluster(c.name).state == "terminated"
        assert executor.sky.clusters == {}
        assert r.state == "cancelled", r


def _ended_with_a_leak(led, tmp_path, executor):
    """A run that ended while SkyPilot still holds its cluster (the ledger says terminated)."""
    job, c = _killed_mid_job(led, tmp_path, executor)
    leaked = dict(executor.sky.clusters)
    Controller(job, make_deps(led, ScriptedProvider(), executor)).run()  # resumes, tears down, runs attempt 2
    executor.sky.clusters.update(leaked)  # as before the fix: cleanup "terminated" it without SkyPilot
    assert led.get_cluster(c.name).state == "terminated"
    return job, c, next(iter(leaked))


def test_down_finds_a_sky_cluster_the_ledger_thinks_gone_by_either_name(tmp_path):
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    release_for = lambda p: executor if p == "slurm" else None  # noqa: E731
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c, name = _ended_with_a_leak(led, tmp_path, executor)
        r = down_target(led, name, lambda cloud: ScriptedProvider(), release_for=release_for)  # `down gl-...-c1`
        assert name in r.how and "taken down" in r.how
        assert executor.sky.clusters == {}
        r = down_target(led, name, lambda cloud: ScriptedProvider(), release_for=release_for)
        assert r.how == f"cluster {c.name} already terminated"

        executor.sky.clusters[name] = "UP"
        r = down_target(led, job.run_id, lambda cloud: ScriptedProvider(), release_for=release_for)  # `down RUN` of the ended run
        assert r.how.startswith("already ended; SkyPilot still had") and executor.sky.clusters == {}
        with pytest.raises(Exception, match="no run or cluster named 'gl-nope'"):
            down_target(led, "gl-nope", lambda cloud: ScriptedProvider(), release_for=release_for)


def test_doctor_reports_and_repairs_a_leaked_sky_cluster(tmp_path):
    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    release_for = lambda p: executor if p == "slurm" else None  # noqa: E731
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c, name = _ended_with_a_leak(led, tmp_path, executor)
        executor.sky.clusters["gl-someone-elses"] = "UP"

        (leak, stranger) = sorted(_check_sky_clusters(led, repair=False, release_for=release_for), key=lambda f: f.detail)
        assert leak.status == NEEDS_YOU and name in leak.detail and f"launcher down {name}" in leak.detail
        assert stranger.status == NEEDS_YOU and "not in this ledger" in stranger.detail
        assert name in executor.sky.clusters  # a dry run touches nothing

        found = _check_sky_clusters(led, repair=True, release_for=release_for)
        assert [f.status for f in found if name in f.detail] == [REPAIRED]
        assert list(executor.sky.clusters) == ["gl-someone-elses"], "what the ledger does not know is not touched"
        executor.sky.clusters.clear()
        assert [f.status for f in _check_sky_clusters(led, repair=True, release_for=release_for)] == [OK]


def test_doctor_does_not_ask_skypilot_without_declared_clusters(tmp_path):
    def never(provider):
        raise AssertionError("SkyPilot asked")

    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        (f,) = _check_sky_clusters(led, repair=True, release_for=never)
        assert f.status == OK


@dataclass
class QueuedThenNoCapacity(ScriptedExecution):
    """Its job waits queued (says so), then the backend gives up: nothing ran."""

    def poll(self):
        self._polls += 1
        self.phase = "launch"
        self.waiting_for = "the Slurm job of SkyPilot cluster gl-x is queued behind other jobs on slurm/team"
        if self._polls > 2:
            return ExecResult(Outcome.NO_CAPACITY, None, "setup", detail=self.waiting_for + "; gave up after 60s queued")
        return None


def test_a_job_queued_past_max_wait_says_what_it_waited_for_and_fails(tmp_path):
    notes: list[str] = []
    clock = iter(range(0, 10**6, 30))  # each reading of the clock: 30 s later
    executor = SkyLikeExecutor([lambda: QueuedThenNoCapacity(None)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job = make_job(led, tmp_path, offers=SLURM, spec_text="run: python train.py\nlauncher: {max_wait: 2m}\n")
        deps = make_deps(led, ScriptedProvider(), executor, notify=notes.append, clock=lambda: float(next(clock)),
                         max_wait_s=job.spec.launcher.max_wait_seconds)  # fmt: skip
        result = Controller(job, deps).run()

        assert (result.state, result.end_reason) == ("failed", "provision_failed")
        assert executor.started[0].request.max_queue_s == 120.0  # the spec's max_wait bounds the queue
        assert any(n.startswith("waiting: the Slurm job of SkyPilot cluster gl-x is queued") for n in notes), notes
        waits = led.events(job.run_id, kind="waiting")
        assert len(waits) == len(executor.started), "one event per change, not per poll"
        run = led.get_run(job.run_id)
        failed = [e.data for e in led.events(job.run_id, kind="state_change") if e.data.get("to") == "failed"]
        assert run.end_reason == "provision_failed"
        assert any("max_wait" in str(d) and "queued behind other jobs" in str(d) for d in failed), failed
        assert executor.sky.clusters == {}, "each queued attempt's SkyPilot cluster is taken down"
