"""Leases: one owner per submitted run, renewed by heartbeat, adopted once expired, and fenced
so a replica that lost a run can no longer write for it (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

import pytest

from launcher.errors import ConflictError
from launcher.ledger import EndReason, RunState
from launcher.ledger.leases import LEASE_ADOPTED_EVENT, LEASE_CLAIMED_EVENT, LeaseLedger, LeaseLostError
from tests.ledger.conftest import FakeClock
from tests.ledger.helpers import gpu_attempt, make_run

TTL = 10.0


@pytest.fixture
def leases(ledger_url: str, clock: FakeClock):
    with LeaseLedger(ledger_url, now=clock) as led:
        yield led


def submit(led: LeaseLedger, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        run = led.create_run(make_run())
        led.submit_lease(run.run_id, submitted_by="ada")
        ids.append(run.run_id)
    return ids


def test_claim_renew_expire_adopt(leases: LeaseLedger, clock: FakeClock) -> None:
    (run_id,) = submit(leases, 1)
    (claim,) = leases.claim_leases("A", ttl_s=TTL, limit=5)
    assert (claim.run_id, claim.generation, claim.adopted_from) == (run_id, 1, None)
    assert leases.claim_leases("B", ttl_s=TTL, limit=5) == []  # held
    clock.advance(seconds=8)
    assert leases.renew_leases("A", ttl_s=TTL) == {run_id}
    clock.advance(seconds=8)  # 16 s after the claim, 8 s after the renewal: still A's
    assert leases.claim_leases("B", ttl_s=TTL, limit=5) == []
    clock.advance(seconds=2.5)  # A stopped renewing: expired
    (adopted,) = leases.claim_leases("B", ttl_s=TTL, limit=5)
    assert (adopted.run_id, adopted.generation, adopted.adopted_from) == (run_id, 2, "A")
    assert leases.renew_leases("A", ttl_s=TTL) == set()  # A learns it lost the run
    lease = leases.lease(run_id)
    assert (lease.owner_id, lease.generation) == ("B", 2)
    kinds = [(e.kind, e.data) for e in leases.events(run_id, kind=[LEASE_CLAIMED_EVENT, LEASE_ADOPTED_EVENT])]
    assert kinds == [
        (LEASE_CLAIMED_EVENT, {"owner": "A", "generation": 1}),
        (LEASE_ADOPTED_EVENT, {"owner": "B", "generation": 2, "from": "A"}),
    ]


def test_fenced_writes_stop_the_moment_the_lease_moves(leases: LeaseLedger, clock: FakeClock) -> None:
    (run_id,) = submit(leases, 1)
    (a,) = leases.claim_leases("A", ttl_s=TTL, limit=1)
    as_a = leases.fenced(run_id, "A", a.generation)
    as_a.set_run_state(run_id, RunState.PROVISIONING, expected_from=RunState.PENDING)
    first = as_a.add_attempt(run_id, gpu_attempt())
    clock.advance(seconds=TTL + 1)
    (b,) = leases.claim_leases("B", ttl_s=TTL, limit=1)
    as_b = leases.fenced(run_id, "B", b.generation)
    # A (alive but too late) can neither open an attempt, end one, move the run nor log.
    with pytest.raises(LeaseLostError):
        as_a.add_attempt(run_id, gpu_attempt())
    with pytest.raises(LeaseLostError):
        as_a.end_attempt(first.attempt_id, EndReason.COMPLETED)
    with pytest.raises(LeaseLostError):
        as_a.set_run_state(run_id, RunState.RUNNING, expected_from=RunState.PROVISIONING)
    with pytest.raises(LeaseLostError):
        as_a.add_event(run_id, "log", {"line": "late"})
    assert isinstance(LeaseLostError("x"), ConflictError)
    # B continues the run as a resume does: closes the open attempt, opens the next.
    as_b.end_attempt(first.attempt_id, EndReason.ABANDONED)
    as_b.set_run_state(run_id, RunState.RECOVERING, expected_from=RunState.PROVISIONING)
    second = as_b.add_attempt(run_id, gpu_attempt())
    attempts = leases.attempts(run_id)
    assert [(x.seq, x.end_reason) for x in attempts] == [(1, "abandoned"), (2, None)]
    assert second.seq == 2 and len(leases.open_attempts(run_id=run_id)) == 1
    assert leases.events(run_id, kind="log") == []


def test_release_done_and_terminal_runs_are_not_claimed(leases: LeaseLedger) -> None:
    r1, r2, r3 = submit(leases, 3)
    leases.set_run_state(r2, RunState.CANCELLED, expected_from=RunState.PENDING)
    claims = leases.claim_leases("A", ttl_s=TTL, limit=10)
    assert [c.run_id for c in claims] == [r1, r3]
    assert leases.lease(r2).done
    assert leases.release_lease(r1, "A", claims[0].generation, done=True)
    assert not leases.release_lease(r1, "A", claims[0].generation, done=True)  # no longer held
    assert leases.release_all("A") == 1  # r3 handed back: claimable at once
    (again,) = leases.claim_leases("B", ttl_s=TTL, limit=10)
    assert (again.run_id, again.generation, again.adopted_from) == (r3, 2, None)


def test_submit_twice_or_unknown_run_is_refused(leases: LeaseLedger) -> None:
    (run_id,) = submit(leases, 1)
    with pytest.raises(ConflictError):
        leases.submit_lease(run_id)
    from launcher.errors import NotFoundError

    with pytest.raises(NotFoundError):
        leases.submit_lease("r-nope")


def test_concurrent_claims_split_runs_without_overlap(ledger_url: str) -> None:
    """Six replicas claim from 30 waiting runs at once: every run is claimed exactly once."""
    with LeaseLedger(ledger_url) as led:
        ids = submit(led, 30)
    got: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def replica(name: str) -> None:
        try:
            with LeaseLedger(ledger_url) as mine:
                barrier.wait(timeout=30)
                got[name] = []
                for _ in range(20):
                    got[name] += [c.run_id for c in mine.claim_leases(name, ttl_s=60, limit=2)]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=replica, args=(f"R{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    claimed = [r for runs in got.values() for r in runs]
    assert sorted(claimed) == sorted(ids)
    with LeaseLedger(ledger_url) as led:
        owners = {x.run_id: x.owner_id for x in led.leases()}
        assert all(owners[r] == name for name, runs in got.items() for r in runs)
        assert all(x.generation == 1 for x in led.leases())
