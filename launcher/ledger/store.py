"""The Ledger: the one read/write API over the ledger database (SQLite or PostgreSQL).

Every write is its own short transaction, committed before the method returns, so the caller
(e.g. the controller, which records each transition BEFORE acting on it) can rely on it after a
crash. Writes that form one state change go inside `with ledger.transaction():` and land
together or not at all (see base.py). Opening a Ledger upgrades the schema to head under a lock (see engine.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import Connection, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from launcher.errors import BadInputError, ConflictError, NotFoundError, did_you_mean
from launcher.ledger import models as m
from launcher.ledger.base import LedgerBase, _as_set, utc_now
from launcher.ledger.costs import CostQueries
from launcher.ledger.facts import FACT_EVENT_KINDS, write_facts
from launcher.ledger.infra import InfraRecords
from launcher.ledger.records import (
    TERMINAL_RUN_STATES,
    AttemptRecord,
    AttemptState,
    EventKind,
    EventRecord,
    NewAttempt,
    RunRecord,
)
from launcher.ledger.rows import RUN_FIELDS, attempt_from_row, event_from_row, jsonable, run_from_row, write_tags

__all__ = ["Ledger", "LedgerBase", "utc_now"]


class Ledger(CostQueries, InfraRecords):
    """Open (and migrate) the ledger at `url` (default: `launcher.paths.db_url()`).

    `now` is the clock used for every timestamp the ledger sets (inject it in tests).
    A Ledger is cheap to keep for the life of a process; call `close()` (or use it as a
    context manager) to release the connection pool. Not shared across fork(): open one per
    process. Methods are grouped: runs/attempts/events here, clusters/heartbeats/reaper audit
    in infra.py, spend and report queries in costs.py, connection handling in base.py.
    """

    # ---- runs ---------------------------------------------------------------------------------
    def create_run(self, run: RunRecord, tags: Mapping[str, str] | None = None) -> RunRecord:
        """Insert a run and its tags (`tags` merged over `run.tags`) in one transaction.

        created_at/updated_at come from the clock unless `run.created_at` is set.
        Raises ConflictError when the run_id exists.
        """
        now = self._now()
        created = run.created_at or now
        all_tags = {**run.tags, **(tags or {})}
        values = {f: getattr(run, f) for f in RUN_FIELDS}
        values.update(
            created_at=created, updated_at=created, ended_at=None, end_reason=None,
            state=str(run.state), seeds=jsonable(run.seeds) if run.seeds is not None else None,
        )  # fmt: skip
        try:
            with self._tx() as c:
                c.execute(insert(m.runs).values(values))
                write_tags(c, "run", run.run_id, all_tags)
        except IntegrityError as e:
            raise ConflictError(f"run {run.run_id!r} already exists in the ledger") from e
        return self.get_run(run.run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """Raises NotFoundError."""
        with self._read() as c:
            row = c.execute(select(m.runs).where(m.runs.c.run_id == run_id)).first()
            if row is None:
                raise NotFoundError(f"no run {run_id!r} in the ledger")
            return run_from_row(row, self._tags(c, "run", [run_id]).get(run_id))

    def find_run(self, prefix: str, *, projects: Collection[str] | None = None) -> RunRecord:
        """The run whose id is `prefix` or starts with it (also matches a unique run name).

        `projects`: prefixes and names match only runs of these projects (None: every project),
        so neither an ambiguity nor a "did you mean" names another project's run. A whole run id
        always finds its run (the caller checks access to it).

        Raises NotFoundError when none matches, BadInputError (listing candidates) when several do.
        """
        prefix = prefix.strip()
        if not prefix:
            raise BadInputError("empty run id")
        r = m.runs.c
        scope = [] if projects is None else [r.project.in_(sorted(projects))]
        with self._read() as c:
            exact = c.execute(select(r.run_id).where(r.run_id == prefix)).first()
            if exact is not None:
                return self.get_run(exact.run_id)
            q = (
                select(r.run_id, r.name)
                .where(or_(r.run_id.startswith(prefix, autoescape=True), r.name == prefix), *scope)
                .order_by(r.created_at.desc())
                .limit(6)
            )
            hits = c.execute(q).all()
            if not hits:
                recent = c.execute(select(r.run_id).where(*scope).order_by(r.created_at.desc()).limit(50)).scalars()
                raise NotFoundError(f"no run matches {prefix!r}", hint=did_you_mean(prefix, recent))
        if len(hits) > 1:
            shown = ", ".join(f"{h.run_id} ({h.name})" for h in hits[:5])
            more = " ..." if len(hits) > 5 else ""
            raise BadInputError(f"{prefix!r} matches several runs: {shown}{more}", hint="give more of the run id")
        return self.get_run(hits[0].run_id)

    def list_runs(
        self,
        *,
        state: str | Collection[str] | None = None,
        project: str | None = None,
        owner: str | None = None,
        since: datetime | None = None,
        limit: int | None = 100,
    ) -> list[RunRecord]:
        """Newest first. `since` filters on created_at."""
        r = m.runs.c
        q = select(m.runs).order_by(r.created_at.desc(), r.run_id.desc())
        if state is not None:
            q = q.where(r.state.in_(_as_set(state)))
        if project is not None:
            q = q.where(r.project == project)
        if owner is not None:
            q = q.where(r.owner == owner)
        if since is not None:
            q = q.where(r.created_at >= since)
        if limit is not None:
            q = q.limit(limit)
        with self._read() as c:
            rows = c.execute(q).all()
            tags = self._tags(c, "run", [row.run_id for row in rows])
        return [run_from_row(row, tags.get(row.run_id)) for row in rows]

    def set_run_state(
        self,
        run_id: str,
        state: str,
        *,
        reason: str | None = None,
        expected_from: str | Collection[str] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Compare-and-set the run's state and append a `state_change` event, atomically.

        When `expected_from` is given the update applies only if the current state is one of
        them; otherwise ConflictError (another process advanced it first). Entering a terminal
        state sets ended_at and end_reason (= reason); leaving one clears them. NotFoundError
        when the run is unknown.
        """
        r = m.runs.c
        now = self._now()
        with self._tx() as c:
            row = c.execute(select(r.state).where(r.run_id == run_id).with_for_update()).first()
            if row is None:
                raise NotFoundError(f"no run {run_id!r} in the ledger")
            old = row.state
            if expected_from is not None and old not in _as_set(expected_from):
                raise ConflictError(
                    f"run {run_id} is {old!r}, expected {' or '.join(map(repr, _as_set(expected_from)))}"
                )
            terminal = state in TERMINAL_RUN_STATES
            values: dict[str, Any] = {"state": str(state), "updated_at": now}
            values.update(ended_at=now if terminal else None, end_reason=reason if terminal else None)
            res = c.execute(update(m.runs).where(r.run_id == run_id, r.state == old).values(values))
            if res.rowcount != 1:  # cannot happen under the row lock; kept as the CAS guard
                raise ConflictError(f"run {run_id} changed state concurrently")
            if terminal or old in TERMINAL_RUN_STATES:  # its cost rollup is written (or dropped)
                from launcher.ledger.rollup import write_rollup

                write_rollup(c, [run_id])
            event = {"from": old, "to": str(state), "reason": reason, **(data or {})}
            c.execute(
                insert(m.events).values(
                    run_id=run_id, attempt_id=None, at=now, kind=EventKind.STATE_CHANGE.value,
                    data=jsonable(event),
                )  # fmt: skip
            )
        return self.get_run(run_id)

    def set_run_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Upsert tags on a run (existing keys are overwritten)."""
        self.get_run(run_id)
        with self._tx() as c:
            write_tags(c, "run", run_id, tags)

    # ---- attempts -----------------------------------------------------------------------------
    def add_attempt(
        self,
        run_id: str,
        attempt: NewAttempt,
        *,
        state: str = AttemptState.PROVISIONING,
        started_at: datetime | None = None,
    ) -> AttemptRecord:
        """Start attempt seq = previous + 1 (safe under concurrent callers for the same run).

        Billing starts at `started_at` (default: now). NotFoundError when the run is unknown.
        """
        a = m.attempts.c
        start = started_at or self._now()
        with self._tx() as c:
            # Lock the run row so concurrent adders for one run serialize (PostgreSQL);
            # SQLite's BEGIN IMMEDIATE already serializes writers.
            run = c.execute(select(m.runs.c.run_id).where(m.runs.c.run_id == run_id).with_for_update()).first()
            if run is None:
                raise NotFoundError(f"no run {run_id!r} in the ledger")
            seq = (c.execute(select(func.max(a.seq)).where(a.run_id == run_id)).scalar() or 0) + 1
            attempt_id = f"{run_id}-a{seq}"
            c.execute(
                insert(m.attempts).values(
                    attempt_id=attempt_id, run_id=run_id, seq=seq, cloud=attempt.cloud,
                    region=attempt.region, zone=attempt.zone, instance_type=attempt.instance_type,
                    accelerator=attempt.accelerator, accelerator_count=attempt.accelerator_count,
                    num_nodes=attempt.num_nodes, spot=attempt.spot,
                    price_usd_per_hour=attempt.price_usd_per_hour,
                    on_demand_price_usd_per_hour=attempt.on_demand_price_usd_per_hour,
                    cluster=attempt.cluster, state=str(state), started_at=start,
                    billing_account_id=attempt.billing_account_id,
                    billing_account_name=attempt.billing_account_name,
                )  # fmt: skip
            )
        return self.get_attempt(attempt_id)

    def set_attempt_state(self, attempt_id: str, state: str, *, cluster: str | None = None) -> AttemptRecord:
        """Move an open attempt to `state` (e.g. setup -> running); optionally record its cluster.

        ConflictError when the attempt has already ended.
        """
        a = m.attempts.c
        values: dict[str, Any] = {"state": str(state)}
        if cluster is not None:
            values["cluster"] = cluster
        with self._tx() as c:
            res = c.execute(update(m.attempts).where(a.attempt_id == attempt_id, a.ended_at.is_(None)).values(values))
            if res.rowcount != 1:
                self._attempt_missing_or_ended(c, attempt_id)
        return self.get_attempt(attempt_id)

    def end_attempt(
        self,
        attempt_id: str,
        end_reason: str,
        *,
        exit_code: int | None = None,
        ended_at: datetime | None = None,
        billed_seconds: float | None = None,
    ) -> AttemptRecord:
        """Close an open attempt. billed_seconds defaults to ended_at - started_at.

        ConflictError when it was already ended (compare-and-set: exactly one caller wins).
        """
        a = m.attempts.c
        end = ended_at or self._now()
        with self._tx() as c:
            row = c.execute(
                select(a.run_id, a.started_at, a.ended_at).where(a.attempt_id == attempt_id).with_for_update()
            ).first()
            if row is None or row.ended_at is not None:
                self._attempt_missing_or_ended(c, attempt_id)
            billed = billed_seconds if billed_seconds is not None else max(0.0, (end - row.started_at).total_seconds())
            res = c.execute(
                update(m.attempts)
                .where(a.attempt_id == attempt_id, a.ended_at.is_(None))
                .values(
                    state=AttemptState.ENDED.value, ended_at=end, end_reason=str(end_reason),
                    exit_code=exit_code, billed_seconds=billed,
                )  # fmt: skip
            )
            if res.rowcount != 1:
                self._attempt_missing_or_ended(c, attempt_id)
            write_facts(c, [attempt_id])  # the cost facts reports read, in the same transaction
            from launcher.ledger.rollup import rewrite_if_ended

            rewrite_if_ended(c, row.run_id)  # the run ended first: its rollup now includes this attempt
        return self.get_attempt(attempt_id)

    def _attempt_missing_or_ended(self, c: Connection, attempt_id: str) -> NoReturn:
        a = m.attempts.c
        row = c.execute(select(a.end_reason).where(a.attempt_id == attempt_id)).first()
        if row is None:
            raise NotFoundError(f"no attempt {attempt_id!r} in the ledger")
        raise ConflictError(f"attempt {attempt_id} already ended ({row.end_reason})")

    def get_attempt(self, attempt_id: str) -> AttemptRecord:
        with self._read() as c:
            row = c.execute(select(m.attempts).where(m.attempts.c.attempt_id == attempt_id)).first()
        if row is None:
            raise NotFoundError(f"no attempt {attempt_id!r} in the ledger")
        return attempt_from_row(row)

    def attempts(self, run_id: str) -> list[AttemptRecord]:
        """A run's attempts in seq order."""
        a = m.attempts.c
        with self._read() as c:
            rows = c.execute(select(m.attempts).where(a.run_id == run_id).order_by(a.seq)).all()
        return [attempt_from_row(r) for r in rows]

    def open_attempts(self, *, run_id: str | None = None, cluster: str | None = None) -> list[AttemptRecord]:
        """Attempts not yet ended (for crash cleanup and the reaper's 'no running attempt')."""
        a = m.attempts.c
        q = select(m.attempts).where(a.ended_at.is_(None)).order_by(a.started_at, a.attempt_id)
        if run_id is not None:
            q = q.where(a.run_id == run_id)
        if cluster is not None:
            q = q.where(a.cluster == cluster)
        with self._read() as c:
            return [attempt_from_row(r) for r in c.execute(q).all()]

    def ended_spot_attempts(self, *, since: datetime, limit: int = 5000) -> list[AttemptRecord]:
        """Spot attempts of any run that ended since `since`, newest first (at most `limit`): what
        the placement policy learns about each zone's capacity before a run has seen any."""
        a = m.attempts.c
        q = (select(m.attempts).where(a.spot.is_(True), a.ended_at.is_not(None), a.ended_at >= since)
             .order_by(a.ended_at.desc(), a.attempt_id).limit(limit))  # fmt: skip
        with self._read() as c:
            return [attempt_from_row(r) for r in c.execute(q).all()]

    # ---- events -------------------------------------------------------------------------------
    def recent_events(self, kind: str, *, since: datetime, limit: int = 5000) -> list[EventRecord]:
        """Events of one kind of any run since `since`, newest first (at most `limit`): e.g. the
        outages earlier runs saw, for a new run's placement policy."""
        e = m.events.c
        q = select(m.events).where(e.kind == kind, e.at >= since).order_by(e.at.desc(), e.id.desc()).limit(limit)
        with self._read() as c:
            return [event_from_row(r) for r in c.execute(q).all()]

    def add_event(
        self,
        run_id: str,
        kind: str,
        data: Mapping[str, Any] | None = None,
        *,
        attempt_id: str | None = None,
        at: datetime | None = None,
    ) -> EventRecord:
        """Append an event. NotFoundError when the run (or attempt) is unknown."""
        when = at or self._now()
        payload = jsonable(dict(data or {}))
        try:
            with self._tx() as c:
                res = c.execute(
                    insert(m.events).values(run_id=run_id, attempt_id=attempt_id, at=when, kind=str(kind), data=payload)
                )
                event_id = res.inserted_primary_key[0]
                if attempt_id is not None and str(kind) in FACT_EVENT_KINDS:
                    write_facts(c, [attempt_id])  # an ended attempt's facts change (no-op while open)
                if str(kind) in FACT_EVENT_KINDS:
                    from launcher.ledger.rollup import rewrite_if_ended

                    rewrite_if_ended(c, run_id)  # a late event changes an ended run's costs
        except IntegrityError as e:
            raise NotFoundError(f"no run {run_id!r} / attempt {attempt_id!r} in the ledger") from e
        return EventRecord(id=event_id, run_id=run_id, attempt_id=attempt_id, at=when, kind=str(kind), data=payload)

    def events(
        self,
        run_id: str,
        *,
        kind: str | Collection[str] | None = None,
        after_id: int | None = None,
    ) -> list[EventRecord]:
        """A run's events in insertion order; `after_id` for incremental tailing."""
        e = m.events.c
        q = select(m.events).where(e.run_id == run_id).order_by(e.id)
        if kind is not None:
            q = q.where(e.kind.in_(_as_set(kind)))
        if after_id is not None:
            q = q.where(e.id > after_id)
        with self._read() as c:
            return [event_from_row(r) for r in c.execute(q).all()]
