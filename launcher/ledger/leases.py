"""Leases: which `launcher server` replica drives each submitted run, and until when.

A submitted run has one row in `leases`. A replica *claims* rows that nobody holds or whose
holder let the lease expire (a dead replica stops renewing), renews all of its leases with one
UPDATE per heartbeat, and releases a lease when its run ends. Every claim bumps `generation`;
the controller a replica starts writes through a `FencedLedger` that checks, inside each write
transaction and under the lease row's lock, that the lease still has this owner and generation.
So once another replica has adopted a run, nothing the old owner does reaches the ledger: two
replicas can never both open an attempt, end one, or move the run.

PostgreSQL: claims take row locks with `SELECT ... FOR UPDATE SKIP LOCKED`, so replicas claiming
at the same time split the waiting runs between them instead of queueing on each other.
SQLite: write transactions are BEGIN IMMEDIATE (one writer at a time), which gives the same
guarantees for several replicas on one machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, insert, select, update

from launcher.errors import ConflictError, NotFoundError
from launcher.ledger import models as m
from launcher.ledger.records import TERMINAL_RUN_STATES
from launcher.ledger.rows import jsonable
from launcher.ledger.store import Ledger

LEASE_CLAIMED_EVENT = "lease_claimed"  # a replica took a waiting run
LEASE_ADOPTED_EVENT = "lease_adopted"  # a replica took a run whose owner's lease had expired


class LeaseLostError(ConflictError):
    """This process no longer holds the run's lease (another replica adopted it)."""


@dataclass(frozen=True)
class LeaseRecord:
    run_id: str
    owner_id: str | None
    generation: int
    expires_at: datetime | None
    acquired_at: datetime | None
    renewed_at: datetime | None
    submitted_at: datetime
    submitted_by: str | None
    done: bool


@dataclass(frozen=True)
class Claim:
    """A lease this replica now holds. `adopted_from` is the previous owner when the lease was
    taken over after it expired (the run is then continued as `launch --resume` does)."""

    run_id: str
    generation: int
    adopted_from: str | None


def _lease_from_row(row: Any) -> LeaseRecord:
    d = row._mapping
    return LeaseRecord(**{c.name: d[c.name] for c in m.leases.columns})


class LeaseLedger(Ledger):
    """The Ledger plus the lease operations the server needs.

    `pool_size`: PostgreSQL connections kept for this process (a server's controller threads and
    request threads share them; the CLI's default pool of 2 + 4 would make them queue)."""

    def __init__(self, url: str | None = None, *, pool_size: int | None = None, **kw: Any) -> None:
        super().__init__(url, **kw)
        if pool_size and self._engine.dialect.name == "postgresql":
            from sqlalchemy import create_engine

            from launcher.ledger.engine import WRITE

            old = self._engine
            self._engine = create_engine(old.url, pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size)
            self._write_engine = self._engine.execution_options(**WRITE)
            old.dispose()

    def submit_lease(self, run_id: str, *, submitted_by: str | None = None) -> LeaseRecord:
        """Put a recorded run in the queue for the server's replicas (no owner yet)."""
        now = self._now()
        with self._tx() as c:
            if c.execute(select(m.runs.c.run_id).where(m.runs.c.run_id == run_id)).first() is None:
                raise NotFoundError(f"no run {run_id!r} in the ledger")
            if c.execute(select(m.leases.c.run_id).where(m.leases.c.run_id == run_id)).first() is not None:
                raise ConflictError(f"run {run_id} was already submitted")
            c.execute(
                insert(m.leases).values(
                    run_id=run_id, owner_id=None, generation=0, expires_at=None, acquired_at=None,
                    renewed_at=None, submitted_at=now, submitted_by=submitted_by, done=False,
                )  # fmt: skip
            )
        return self.lease(run_id)

    def lease(self, run_id: str) -> LeaseRecord:
        with self._read() as c:
            row = c.execute(select(m.leases).where(m.leases.c.run_id == run_id)).first()
        if row is None:
            raise NotFoundError(f"run {run_id!r} was not submitted to a server")
        return _lease_from_row(row)

    def leases(self, *, owner_id: str | None = None, done: bool | None = None) -> list[LeaseRecord]:
        q = select(m.leases).order_by(m.leases.c.submitted_at, m.leases.c.run_id)
        if owner_id is not None:
            q = q.where(m.leases.c.owner_id == owner_id)
        if done is not None:
            q = q.where(m.leases.c.done.is_(done))
        with self._read() as c:
            return [_lease_from_row(r) for r in c.execute(q).all()]

    def claim_leases(self, owner_id: str, *, ttl_s: float, limit: int) -> list[Claim]:
        """Take up to `limit` runs that wait for an owner or whose lease expired. Rows another
        replica is claiming right now are skipped, not waited for. Runs that ended (e.g. cancelled
        while waiting) are marked done instead of claimed."""
        if limit <= 0:
            return []
        now = self._now()
        l = m.leases.c
        claims: list[Claim] = []
        with self._tx() as c:
            q = (
                select(l.run_id, l.owner_id, l.generation, m.runs.c.state)
                .join(m.runs, m.runs.c.run_id == l.run_id)
                .where(l.done.is_(False), (l.owner_id.is_(None)) | (l.expires_at < now))
                .order_by(l.submitted_at, l.run_id)
                .limit(limit)
                .with_for_update(skip_locked=True, of=m.leases)
            )
            for row in c.execute(q).all():
                if row.state in TERMINAL_RUN_STATES:
                    c.execute(update(m.leases).where(l.run_id == row.run_id).values(done=True, owner_id=None, expires_at=None))
                    continue
                gen = row.generation + 1
                c.execute(
                    update(m.leases)
                    .where(l.run_id == row.run_id, l.generation == row.generation)
                    .values(owner_id=owner_id, generation=gen, expires_at=now + timedelta(seconds=ttl_s),
                            acquired_at=now, renewed_at=now)  # fmt: skip
                )
                adopted = row.owner_id
                kind = LEASE_ADOPTED_EVENT if adopted else LEASE_CLAIMED_EVENT
                data = {"owner": owner_id, "generation": gen, **({"from": adopted} if adopted else {})}
                c.execute(insert(m.events).values(run_id=row.run_id, attempt_id=None, at=now, kind=kind, data=jsonable(data)))
                claims.append(Claim(row.run_id, gen, adopted))
        return claims

    def renew_leases(self, owner_id: str, *, ttl_s: float) -> set[str]:
        """Extend every lease this owner holds (one statement); returns the runs still held. A
        lease that expired but was not adopted yet is still ours: claim and renew serialize on
        the row, so exactly one of them wins."""
        now = self._now()
        l = m.leases.c
        with self._tx() as c:
            rows = c.execute(
                update(m.leases)
                .where(l.owner_id == owner_id, l.done.is_(False))
                .values(expires_at=now + timedelta(seconds=ttl_s), renewed_at=now)
                .returning(l.run_id)
            ).all()
        return {r.run_id for r in rows}

    def release_lease(self, run_id: str, owner_id: str, generation: int, *, done: bool) -> bool:
        """Give a lease up (done=True: the run ended, nobody needs to take it). False when this
        owner no longer held it."""
        l = m.leases.c
        with self._tx() as c:
            res = c.execute(
                update(m.leases)
                .where(l.run_id == run_id, l.owner_id == owner_id, l.generation == generation)
                .values(owner_id=None, expires_at=None, done=done)
            )
        return res.rowcount == 1

    def release_all(self, owner_id: str) -> int:
        """Hand every lease of this owner back at once (a replica shutting down)."""
        l = m.leases.c
        with self._tx() as c:
            res = c.execute(update(m.leases).where(l.owner_id == owner_id, l.done.is_(False)).values(owner_id=None, expires_at=None))
        return res.rowcount

    def fenced(self, run_id: str, owner_id: str, generation: int) -> FencedLedger:
        """A view of this ledger (same engine) whose writes succeed only while this owner holds
        the run's lease at this generation."""
        return FencedLedger._view(self, run_id, owner_id, generation)


class FencedLedger(LeaseLedger):
    """Every write transaction first checks the lease (row-locked) and raises LeaseLostError
    when another replica took the run. Shares its parent's engine; close() leaves it open."""

    _fence: tuple[str, str, int]

    @classmethod
    def _view(cls, parent: Ledger, run_id: str, owner_id: str, generation: int) -> FencedLedger:
        view = cls.__new__(cls)
        view.__dict__.update(parent.__dict__)
        view._fence = (run_id, owner_id, generation)
        return view

    def close(self) -> None:  # the parent owns the engine
        pass

    def _check_write(self, conn: Connection) -> None:
        run_id, owner_id, generation = self._fence
        l = m.leases.c
        row = conn.execute(select(l.owner_id, l.generation).where(l.run_id == run_id).with_for_update()).first()
        if row is None or row.owner_id != owner_id or row.generation != generation:
            raise LeaseLostError(f"run {run_id}: this server no longer holds its lease")
