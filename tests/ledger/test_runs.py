"""Runs: create/read/find/list, tags, compare-and-set state transitions."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from launcher.errors import BadInputError, ConflictError, NotFoundError
from launcher.ledger import EventKind, Ledger, RunState
from tests.ledger.conftest import T0
from tests.ledger.helpers import make_run


def test_create_and_get_roundtrip_with_provenance_and_tags(ledger: Ledger) -> None:
    run = make_run(
        "r-20261101-120000-aaaaaa",
        budget_usd=25.0,
        deadline_at=T0 + timedelta(hours=6),
        code_revision="c0ffee" * 6 + "c0ff",
        code_dirty_hash="d" * 64,
        lockfile_hash="l" * 64,
        image="docker:pytorch",
        seeds={"torch": 7, "numpy": 8},
        data_hash="e" * 64,
        host="box",
        launcher_version="0.1.0",
        tags={"team": "cv"},
    )
    created = ledger.create_run(run, tags={"priority": "high", "team": "cv2"})
    got = ledger.get_run(run.run_id)
    assert got == created
    assert got.state == RunState.PENDING
    assert got.created_at == T0 and got.updated_at == T0
    assert got.created_at.tzinfo is not None
    assert got.deadline_at == T0 + timedelta(hours=6)
    assert got.seeds == {"torch": 7, "numpy": 8}
    assert (got.code_revision, got.code_dirty_hash, got.image, got.host) == (run.code_revision, "d" * 64, "docker:pytorch", "box")
    assert got.tags == {"team": "cv2", "priority": "high"}  # explicit tags win over run.tags
    assert got.budget_usd == 25.0 and got.ended_at is None


def test_duplicate_run_id_is_a_conflict_and_writes_nothing(ledger: Ledger) -> None:
    ledger.create_run(make_run("r-dup", name="first"))
    with pytest.raises(ConflictError):
        ledger.create_run(make_run("r-dup", name="second", tags={"x": "1"}))
    got = ledger.get_run("r-dup")
    assert got.name == "first" and got.tags == {}


def test_get_unknown_run_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFoundError):
        ledger.get_run("r-nope")


def test_find_run_by_prefix_name_and_ambiguity(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-20261101-120000-abc123", name="alpha"))
    clock.advance(seconds=1)
    ledger.create_run(make_run("r-20261101-120001-abd456", name="beta"))
    assert ledger.find_run("r-20261101-120000").run_id == "r-20261101-120000-abc123"
    assert ledger.find_run("beta").run_id == "r-20261101-120001-abd456"
    assert ledger.find_run("r-20261101-120001-abd456").name == "beta"
    with pytest.raises(BadInputError) as ambiguous:
        ledger.find_run("r-20261101-1200")
    assert "abc123" in str(ambiguous.value) and "abd456" in str(ambiguous.value)
    with pytest.raises(NotFoundError):
        ledger.find_run("r-2027")
    with pytest.raises(BadInputError):
        ledger.find_run("  ")


def test_find_run_treats_like_wildcards_literally(ledger: Ledger) -> None:
    ledger.create_run(make_run("r-x1"))
    with pytest.raises(NotFoundError):
        ledger.find_run("r-%")
    with pytest.raises(NotFoundError):
        ledger.find_run("r-_1")


def test_list_runs_filters_and_orders_newest_first(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-1", project="vision", owner="ada"))
    clock.advance(minutes=1)
    ledger.create_run(make_run("r-2", project="nlp", owner="bob", tags={"k": "v"}))
    clock.advance(minutes=1)
    ledger.create_run(make_run("r-3", project="vision", owner="bob"))
    ledger.set_run_state("r-3", RunState.RUNNING)
    assert [r.run_id for r in ledger.list_runs()] == ["r-3", "r-2", "r-1"]
    assert [r.run_id for r in ledger.list_runs(project="vision")] == ["r-3", "r-1"]
    assert [r.run_id for r in ledger.list_runs(owner="bob", state=["running", "pending"])] == ["r-3", "r-2"]
    assert [r.run_id for r in ledger.list_runs(state="running")] == ["r-3"]
    assert [r.run_id for r in ledger.list_runs(since=T0 + timedelta(seconds=30))] == ["r-3", "r-2"]
    assert [r.run_id for r in ledger.list_runs(limit=1)] == ["r-3"]
    assert ledger.list_runs(project="nlp")[0].tags == {"k": "v"}


def test_set_run_state_compare_and_set(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-cas"))
    clock.advance(seconds=5)
    r = ledger.set_run_state("r-cas", RunState.PROVISIONING, expected_from=RunState.PENDING)
    assert r.state == "provisioning" and r.updated_at == T0 + timedelta(seconds=5)
    # a second process that still believes the run is pending loses
    with pytest.raises(ConflictError, match="provisioning"):
        ledger.set_run_state("r-cas", RunState.PROVISIONING, expected_from=RunState.PENDING)
    ledger.set_run_state("r-cas", RunState.RUNNING, expected_from=[RunState.PROVISIONING, RunState.RECOVERING])
    assert ledger.get_run("r-cas").state == RunState.RUNNING
    with pytest.raises(NotFoundError):
        ledger.set_run_state("r-missing", RunState.RUNNING)


def test_terminal_state_sets_end_and_records_events(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-end"))
    ledger.set_run_state("r-end", RunState.RUNNING, data={"attempt": 1})
    clock.advance(hours=1)
    done = ledger.set_run_state("r-end", RunState.FAILED, reason="exit code 3")
    assert done.is_terminal and done.ended_at == T0 + timedelta(hours=1) and done.end_reason == "exit code 3"
    changes = ledger.events("r-end", kind=EventKind.STATE_CHANGE)
    assert [(e.data["from"], e.data["to"]) for e in changes] == [("pending", "running"), ("running", "failed")]
    assert changes[0].data["attempt"] == 1 and changes[1].data["reason"] == "exit code 3"
    # resuming out of a terminal state clears the end fields
    again = ledger.set_run_state("r-end", RunState.RECOVERING)
    assert again.ended_at is None and again.end_reason is None


def test_set_run_tags_upserts(ledger: Ledger) -> None:
    ledger.create_run(make_run("r-tags", tags={"a": "1", "b": "2"}))
    ledger.set_run_tags("r-tags", {"b": "3", "c": "4"})
    assert ledger.get_run("r-tags").tags == {"a": "1", "b": "3", "c": "4"}
    with pytest.raises(NotFoundError):
        ledger.set_run_tags("r-none", {"a": "1"})


def test_naive_datetimes_are_refused(ledger: Ledger) -> None:
    with pytest.raises(Exception, match="naive datetime"):
        ledger.create_run(make_run("r-naive", deadline_at=datetime(2026, 1, 1)))
    with pytest.raises(NotFoundError):
        ledger.get_run("r-naive")


def test_default_url_is_sqlite_under_launcher_home(launcher_home, clock) -> None:
    with Ledger(now=clock) as led:
        led.create_run(make_run("r-home"))
        assert led.url.startswith("sqlite:///") and str(launcher_home) in led.url
    assert (launcher_home / "ledger.db").is_file()
    with Ledger(now=clock) as again:
        assert again.get_run("r-home").run_id == "r-home"
