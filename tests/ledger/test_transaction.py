"""Units of work: `with ledger.transaction():` makes several writes land together or not at all
(SQLite and PostgreSQL). A second Ledger on the same database is the independent observer."""

from __future__ import annotations

import threading

import pytest

from launcher.errors import ConflictError, NotFoundError
from launcher.ledger import EndReason, EventKind, Ledger, RunState
from tests.ledger.conftest import FakeClock
from tests.ledger.helpers import gpu_attempt, make_run


@pytest.fixture
def other(ledger_url: str) -> Ledger:
    with Ledger(ledger_url) as led:
        yield led


def _state_changes(led: Ledger, run_id: str) -> list[tuple[str, str]]:
    return [(e.data["from"], e.data["to"]) for e in led.events(run_id, kind=EventKind.STATE_CHANGE)]


def test_a_failing_write_rolls_back_the_earlier_writes_of_the_block(ledger: Ledger, other: Ledger) -> None:
    run = ledger.create_run(make_run())
    with pytest.raises(ConflictError):
        with ledger.transaction():
            ledger.set_run_state(run.run_id, RunState.PROVISIONING, expected_from=RunState.PENDING)
            ledger.add_attempt(run.run_id, gpu_attempt())
            ledger.create_run(make_run(run.run_id))  # the primary key exists: the database refuses it
    assert other.get_run(run.run_id).state == RunState.PENDING
    assert other.attempts(run.run_id) == []
    assert _state_changes(other, run.run_id) == []


def test_an_exception_between_two_writes_leaves_the_run_where_it_was(ledger: Ledger, other: Ledger) -> None:
    run = ledger.create_run(make_run())
    ledger.set_run_state(run.run_id, RunState.PROVISIONING)
    a = ledger.add_attempt(run.run_id, gpu_attempt())
    ledger.set_run_state(run.run_id, RunState.RUNNING)
    with pytest.raises(RuntimeError, match="between"):
        with ledger.transaction():
            ledger.end_attempt(a.attempt_id, EndReason.COMPLETED, exit_code=0)
            raise RuntimeError("died between the two writes")
    got = other.get_attempt(a.attempt_id)
    assert (got.ended_at, got.end_reason, got.exit_code) == (None, None, None)
    assert other.get_run(run.run_id).state == RunState.RUNNING
    assert [x.attempt_id for x in other.open_attempts(run_id=run.run_id)] == [a.attempt_id]


def test_the_block_commits_all_its_writes_at_its_end(ledger: Ledger, other: Ledger) -> None:
    run = ledger.create_run(make_run())
    ledger.set_run_state(run.run_id, RunState.PROVISIONING)
    a = ledger.add_attempt(run.run_id, gpu_attempt())
    ledger.set_run_state(run.run_id, RunState.RUNNING)
    with ledger.transaction():
        ledger.end_attempt(a.attempt_id, EndReason.COMPLETED, exit_code=0)
        ledger.set_run_state(run.run_id, RunState.SUCCEEDED, reason=EndReason.COMPLETED, expected_from=RunState.RUNNING)
        assert other.get_run(run.run_id).state == RunState.RUNNING  # not committed yet
        assert other.get_attempt(a.attempt_id).ended_at is None
    assert other.get_run(run.run_id).state == RunState.SUCCEEDED
    assert other.get_attempt(a.attempt_id).end_reason == EndReason.COMPLETED


def test_reads_inside_the_block_see_its_writes(ledger: Ledger) -> None:
    run = ledger.create_run(make_run())
    with ledger.transaction():
        ledger.set_run_state(run.run_id, RunState.PROVISIONING)
        a = ledger.add_attempt(run.run_id, gpu_attempt())
        assert ledger.get_run(run.run_id).state == RunState.PROVISIONING
        assert [x.attempt_id for x in ledger.open_attempts(run_id=run.run_id)] == [a.attempt_id]
        assert _state_changes(ledger, run.run_id) == [("pending", "provisioning")]
        # A compare-and-set reads the block's own write, not the committed state.
        ledger.set_run_state(run.run_id, RunState.RUNNING, expected_from=RunState.PROVISIONING)


def test_nested_blocks_join_the_outer_one(ledger: Ledger, other: Ledger) -> None:
    run = ledger.create_run(make_run())
    with pytest.raises(RuntimeError):
        with ledger.transaction():
            with ledger.transaction():
                ledger.set_run_state(run.run_id, RunState.PROVISIONING)
                ledger.add_attempt(run.run_id, gpu_attempt())
            assert other.get_run(run.run_id).state == RunState.PENDING  # the inner block did not commit
            raise RuntimeError("the outer block fails after the inner one ended")
    assert other.get_run(run.run_id).state == RunState.PENDING
    assert other.attempts(run.run_id) == []


def test_a_failed_write_the_caller_handles_keeps_the_rest_of_the_block(ledger: Ledger, other: Ledger) -> None:
    """Each method's writes are a savepoint inside the block: PostgreSQL would otherwise refuse
    every later statement of a transaction in which one failed."""
    run = ledger.create_run(make_run())
    with ledger.transaction():
        ledger.set_run_state(run.run_id, RunState.PROVISIONING)
        with pytest.raises(NotFoundError):
            ledger.add_event(run.run_id, "note", attempt_id="no-such-attempt")  # foreign key violation
        with pytest.raises(ConflictError):
            ledger.set_run_state(run.run_id, RunState.RUNNING, expected_from=RunState.PENDING)
        ledger.add_attempt(run.run_id, gpu_attempt())
    assert other.get_run(run.run_id).state == RunState.PROVISIONING
    assert len(other.attempts(run.run_id)) == 1
    assert other.events(run.run_id, kind="note") == []


def test_outside_a_block_each_write_commits_on_its_own(ledger: Ledger, other: Ledger) -> None:
    run = ledger.create_run(make_run())
    ledger.set_run_state(run.run_id, RunState.PROVISIONING)
    ledger.add_attempt(run.run_id, gpu_attempt())
    with pytest.raises(ConflictError):
        ledger.create_run(make_run(run.run_id))
    assert other.get_run(run.run_id).state == RunState.PROVISIONING
    assert len(other.attempts(run.run_id)) == 1


def test_another_thread_does_not_join_the_block(ledger: Ledger, other: Ledger, clock: FakeClock) -> None:
    """A write from another thread while a block is open waits for it (the run row is locked)
    and commits on its own: the block's rollback does not take it along."""
    run = ledger.create_run(make_run())
    started, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def write_from_another_thread() -> None:
        started.set()
        try:
            ledger.add_event(run.run_id, "from_thread")
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        done.set()

    t = threading.Thread(target=write_from_another_thread)
    with pytest.raises(RuntimeError):
        with ledger.transaction():
            ledger.set_run_state(run.run_id, RunState.PROVISIONING)
            t.start()
            assert started.wait(10), "the writer thread did not start"
            assert not done.wait(0.5), "the other thread's write went through while the block held the lock"
            raise RuntimeError("roll back")
    t.join(30)
    assert not t.is_alive() and errors == []
    assert [e.kind for e in other.events(run.run_id, kind="from_thread")] == ["from_thread"]
    assert other.get_run(run.run_id).state == RunState.PENDING
