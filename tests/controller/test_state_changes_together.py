"""A state change made of several ledger writes lands whole or not at all: when one of its writes
fails (a full disk, a lost database), the run and its attempt are left as they were before the
change, never half-moved (e.g. a `running` run whose attempt already `completed`). SQLite and
PostgreSQL; the failure is a LedgerUnavailableError raised by a Ledger subclass at one write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.controller.controller import Controller
from launcher.executors.base import Outcome
from launcher.ledger import Ledger
from launcher.ledger.failures import LedgerUnavailableError
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import ScriptedExecution, ScriptedExecutor, ScriptedProvider
from tests.ledger.conftest import PG_URL, _pg_schema_url


class FailingLedger(Ledger):
    """Fails the write `method` (when the run would enter `into`, for set_run_state) as a full
    disk would; every other write goes through."""

    def __init__(self, url: str, *, method: str, into: str | None = None) -> None:
        super().__init__(url)
        self.method, self.into = method, into

    def _maybe_fail(self, method: str, state: str | None = None) -> None:
        if method == self.method and (self.into is None or state == self.into):
            raise LedgerUnavailableError("the disk holding the ledger is full")

    def set_run_state(self, run_id, state, **kw):
        self._maybe_fail("set_run_state", str(state))
        return super().set_run_state(run_id, state, **kw)

    def upsert_cluster(self, cluster):
        self._maybe_fail("upsert_cluster")
        return super().upsert_cluster(cluster)

    def set_attempt_state(self, attempt_id, state, **kw):
        self._maybe_fail("set_attempt_state")
        return super().set_attempt_state(attempt_id, state, **kw)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    if not PG_URL:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    yield from _pg_schema_url(PG_URL)


def _run_failing(url: str, tmp_path: Path, outcome: Outcome, **fail) -> tuple[Ledger, str, ScriptedProvider]:
    led = FailingLedger(url, **fail)
    job = make_job(led, tmp_path)
    provider = ScriptedProvider()
    executor = ScriptedExecutor([lambda: ScriptedExecution(outcome, exit_code=75 if outcome is Outcome.PREEMPTED else 0)])
    with pytest.raises(LedgerUnavailableError):
        Controller(job, make_deps(led, provider, executor)).run()
    led.close()
    return Ledger(url), job.run_id, provider


def test_a_failed_move_to_succeeded_leaves_the_run_running_with_its_attempt_open(url, tmp_path):
    led, run_id, provider = _run_failing(url, tmp_path, Outcome.SUCCEEDED, method="set_run_state", into="succeeded")
    with led:
        assert led.get_run(run_id).state == "running"
        (a,) = led.attempts(run_id)
        assert (a.ended_at, a.end_reason) == (None, None)  # not `completed` under a `running` run
        (c,) = led.clusters(run_id=run_id)
        assert c.state == "terminated" and provider.terminated == [c.name]  # no machine left behind


def test_a_failed_move_to_recovering_leaves_the_preempted_attempt_open(url, tmp_path):
    led, run_id, _ = _run_failing(url, tmp_path, Outcome.PREEMPTED, method="set_run_state", into="recovering")
    with led:
        assert led.get_run(run_id).state == "running"
        (a,) = led.attempts(run_id)
        assert a.ended_at is None and a.end_reason is None


def test_a_failed_cluster_record_leaves_the_run_pending_without_an_attempt(url, tmp_path):
    led, run_id, provider = _run_failing(url, tmp_path, Outcome.SUCCEEDED, method="upsert_cluster")
    with led:
        assert led.get_run(run_id).state == "pending"  # not `provisioning` with an open attempt
        assert led.attempts(run_id) == [] and led.clusters(run_id=run_id) == []
        assert provider.provisioned == []  # nothing was asked of the cloud


def test_a_failed_attempt_state_leaves_the_run_provisioning_with_its_attempt(url, tmp_path):
    led, run_id, _ = _run_failing(url, tmp_path, Outcome.SUCCEEDED, method="set_attempt_state")
    with led:
        assert led.get_run(run_id).state == "provisioning"  # not `running` with a `provisioning` attempt
        (a,) = led.attempts(run_id)
        assert a.state == "provisioning" and a.ended_at is None
        (c,) = led.clusters(run_id=run_id)
        assert c.state == "provisioning"


class FailingEvents(Ledger):
    """Fails appending events of `kind` as a full disk would."""

    def __init__(self, url: str, *, kind: str) -> None:
        super().__init__(url)
        self.kind = kind

    def add_event(self, run_id, kind, data=None, **kw):
        if str(kind) == self.kind:
            raise LedgerUnavailableError("the disk holding the ledger is full")
        return super().add_event(run_id, kind, data, **kw)


def _running_attempt(led: Ledger, tmp_path: Path):
    from launcher.ledger import ClusterRecord
    from tests.ledger.helpers import gpu_attempt

    job = make_job(led, tmp_path)
    led.set_run_state(job.run_id, "provisioning")
    a = led.add_attempt(job.run_id, gpu_attempt(cluster="c1"))
    led.upsert_cluster(ClusterRecord(name="c1", provider="fake", region="r1", state="up", run_id=job.run_id))
    led.set_run_state(job.run_id, "running")
    return job, a


def test_cleanup_closing_an_attempt_from_its_exit_status_is_all_or_nothing(url, tmp_path):
    from launcher.controller.ended_attempts import CLEANUP_EVENT, close_attempt
    from launcher.executors.job_status import EndedJob

    with FailingEvents(url, kind=CLEANUP_EVENT) as led:
        job, a = _running_attempt(led, tmp_path)
        with pytest.raises(LedgerUnavailableError):
            close_attempt(led, a, job.run_dir, EndedJob(Outcome.SUCCEEDED, 0, "exit 0"), reason="abandoned")
    with Ledger(url) as led:
        got = led.get_attempt(a.attempt_id)
        assert (got.ended_at, got.end_reason) == (None, None)  # not `completed` without the event saying how it was learned


def test_cleanup_terminating_a_cluster_records_both_rows_before_asking_the_provider(url, tmp_path):
    from launcher.controller.cleanup import terminate_cluster

    provider = ScriptedProvider()
    with FailingEvents(url, kind="teardown") as led:
        job, _ = _running_attempt(led, tmp_path)
        with pytest.raises(LedgerUnavailableError):
            terminate_cluster(led, led.get_cluster("c1"), lambda cloud: provider, run_id=job.run_id)
    with Ledger(url) as led:
        assert led.get_cluster("c1").state == "up"  # not `terminating` with no teardown event
    assert provider.terminated == []
