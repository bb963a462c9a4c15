"""The Ledger: the one read/write API over the ledger database (SQLite or PostgreSQL).

Every write is its own short transaction, committed before the method returns, so the caller
(e.g. the controller, which records each transition BEFORE acting on it) can rely on it after a
crash. Opening a Ledger upgrades the schema to head under a lock (see engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Select, func, insert, or_, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from launcher.errors import BadInputError, ConflictError, NotFoundError, ProviderError, did_you_mean
from launcher.ledger import models as m
from launcher.ledger.engine import WRITE, ensure_schema, make_engine, normalize_url
from launcher.ledger.records import (
    TERMINAL_RUN_STATES,
    AttemptRecord,
    AttemptsFrame,
    AttemptState,
    ClusterRecord,
    ClusterState,
    CostRollupRow,
    EventKind,
    EventRecord,
    NewAttempt,
    ReapAuditRecord,
    RunRecord,
)
from launcher.ledger.rollup import rollup_select
from launcher.ledger.rows import (
    RUN_FIELDS,
    attempt_from_row,
    cluster_from_row,
    event_from_row,
    jsonable,
    reap_from_row,
    run_from_row,
    upsert,
    write_tags,
)
from launcher.ledger.spend import attempt_cost_in_window
from launcher.ledger.types import epoch


def utc_now() -> datetime:
    return datetime.now(UTC)


def _as_set(v: str | Collection[str]) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


class Ledger:
    """Open (and migrate) the ledger at `url` (default: `launcher.paths.db_url()`).

    `now` is the clock used for every timestamp the ledger sets (inject it in tests).
    A Ledger is cheap to keep for the life of a process; call `close()` (or use it as a
    context manager) to release the connection pool. Not shared across fork(): open one per
    process.
    """

    def __init__(self, url: str | None = None, *, now: Callable[[], datetime] = utc_now) -> None:
        from launcher.paths import db_url

        self._url = normalize_url(url or db_url())
        self._now = now
        self._engine = make_engine(self._url)
        self._write_engine = self._engine.execution_options(**WRITE)
        try:
            ensure_schema(self._engine, self._url)
        except OperationalError as e:
            self._engine.dispose()
            raise ProviderError(f"cannot open the ledger at {self.url}: {e.orig}") from e

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return make_url(self._url).render_as_string(hide_password=True)

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine, for read-only bulk queries (e.g. pandas.read_sql)."""
        return self._engine

    def now(self) -> datetime:
        return self._now()

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        """A short write transaction (BEGIN IMMEDIATE on SQLite), committed on exit."""
        with self._write_engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            yield conn

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

    def find_run(self, prefix: str) -> RunRecord:
        """The run whose id is `prefix` or starts with it (also matches a unique run name).

        Raises NotFoundError when none matches, BadInputError (listing candidates) when several do.
        """
        prefix = prefix.strip()
        if not prefix:
            raise BadInputError("empty run id")
        r = m.runs.c
        with self._read() as c:
            exact = c.execute(select(r.run_id).where(r.run_id == prefix)).first()
            if exact is not None:
                return self.get_run(exact.run_id)
            q = (
                select(r.run_id, r.name)
                .where(or_(r.run_id.startswith(prefix, autoescape=True), r.name == prefix))
                .order_by(r.created_at.desc())
                .limit(6)
            )
            hits = c.execute(q).all()
            if not hits:
                recent = c.execute(select(r.run_id).order_by(r.created_at.desc()).limit(50)).scalars()
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
                select(a.started_at, a.ended_at).where(a.attempt_id == attempt_id).with_for_update()
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
        return self.get_attempt(attempt_id)

    def _attempt_missing_or_ended(self, c: Connection, attempt_id: str) -> None:
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

    # ---- events -------------------------------------------------------------------------------
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

    # ---- clusters -----------------------------------------------------------------------------
    def upsert_cluster(self, cluster: ClusterRecord) -> ClusterRecord:
        """Insert or update by name (tags merged). created_at is kept from the first insert;
        entering state 'terminated' sets terminated_at (cluster.terminated_at, else now)."""
        k = m.clusters.c
        now = self._now()
        values: dict[str, Any] = {
            "provider": cluster.provider, "region": cluster.region, "zone": cluster.zone,
            "stack": cluster.stack, "state": str(cluster.state), "run_id": cluster.run_id,
            "project": cluster.project, "nodes": jsonable(list(cluster.nodes)), "updated_at": now,
        }  # fmt: skip
        with self._tx() as c:
            old = c.execute(select(k.terminated_at).where(k.name == cluster.name).with_for_update()).first()
            if cluster.state == ClusterState.TERMINATED:
                values["terminated_at"] = (old.terminated_at if old else None) or cluster.terminated_at or now
            else:
                values["terminated_at"] = None
            if old is None:
                c.execute(insert(m.clusters).values(name=cluster.name, created_at=cluster.created_at or now, **values))
            else:
                c.execute(update(m.clusters).where(k.name == cluster.name).values(values))
            write_tags(c, "cluster", cluster.name, cluster.tags)
        return self.get_cluster(cluster.name)

    def set_cluster_state(self, name: str, state: str) -> ClusterRecord:
        return self.upsert_cluster(replace(self.get_cluster(name), state=state, tags={}))

    def get_cluster(self, name: str) -> ClusterRecord:
        """Raises NotFoundError."""
        with self._read() as c:
            row = c.execute(select(m.clusters).where(m.clusters.c.name == name)).first()
            if row is None:
                raise NotFoundError(f"no cluster {name!r} in the ledger")
            return cluster_from_row(row, self._tags(c, "cluster", [name]).get(name))

    def clusters(
        self,
        *,
        state: str | Collection[str] | None = None,
        provider: str | None = None,
        run_id: str | None = None,
    ) -> list[ClusterRecord]:
        """Oldest first."""
        k = m.clusters.c
        q = select(m.clusters).order_by(k.created_at, k.name)
        if state is not None:
            q = q.where(k.state.in_(_as_set(state)))
        if provider is not None:
            q = q.where(k.provider == provider)
        if run_id is not None:
            q = q.where(k.run_id == run_id)
        with self._read() as c:
            rows = c.execute(q).all()
            tags = self._tags(c, "cluster", [r.name for r in rows])
        return [cluster_from_row(r, tags.get(r.name)) for r in rows]

    # ---- heartbeats ---------------------------------------------------------------------------
    def heartbeat(self, *, run_id: str | None = None, cluster: str | None = None, at: datetime | None = None) -> None:
        """Record that the run and/or cluster is alive now (keeps only the latest beat)."""
        subjects = [("run", run_id), ("cluster", cluster)]
        rows = [{"subject_type": t, "subject_id": i, "at": at or self._now()} for t, i in subjects if i]
        if not rows:
            raise BadInputError("heartbeat needs a run_id or a cluster")
        with self._tx() as c:
            upsert(c, m.heartbeats, rows, keys=("subject_type", "subject_id"), update=("at",))

    def last_heartbeat(self, *, run_id: str | None = None, cluster: str | None = None) -> datetime | None:
        """Exactly one of run_id / cluster."""
        if (run_id is None) == (cluster is None):
            raise BadInputError("last_heartbeat needs exactly one of run_id / cluster")
        h = m.heartbeats.c
        subject = ("run", run_id) if run_id is not None else ("cluster", cluster)
        with self._read() as c:
            return c.execute(select(h.at).where(h.subject_type == subject[0], h.subject_id == subject[1])).scalar()

    # ---- reaper audit -------------------------------------------------------------------------
    def record_reap(self, entry: ReapAuditRecord) -> ReapAuditRecord:
        """Append one audit row (at = now unless given); returns it with id and at set."""
        at = entry.at or self._now()
        values = {
            "at": at, "pass_id": entry.pass_id, "provider": entry.provider, "region": entry.region,
            "instance_id": entry.instance_id, "cluster": entry.cluster, "project": entry.project,
            "decision": entry.decision, "action": entry.action,
            "reasons": jsonable(list(entry.reasons)), "hourly_price_usd": entry.hourly_price_usd,
            "estimated_saving_usd": entry.estimated_saving_usd, "ok": entry.ok,
            "error": entry.error, "dry_run": entry.dry_run,
        }  # fmt: skip
        with self._tx() as c:
            new_id = c.execute(insert(m.reap_audit).values(values)).inserted_primary_key[0]
        return replace(entry, id=new_id, at=at, reasons=values["reasons"])

    def reap_audit(
        self,
        *,
        since: datetime | None = None,
        instance_id: str | None = None,
        provider: str | None = None,
        pass_id: str | None = None,
        limit: int | None = None,
    ) -> list[ReapAuditRecord]:
        """Oldest first (with `limit`: the newest `limit` rows, still oldest first)."""
        t = m.reap_audit.c
        q = select(m.reap_audit).order_by(t.id.desc())
        for col, val in ((t.instance_id, instance_id), (t.provider, provider), (t.pass_id, pass_id)):
            if val is not None:
                q = q.where(col == val)
        if since is not None:
            q = q.where(t.at >= since)
        if limit is not None:
            q = q.limit(limit)
        with self._read() as c:
            rows = c.execute(q).all()
        return [reap_from_row(r) for r in reversed(rows)]

    # ---- spend --------------------------------------------------------------------------------
    def spend_usd(
        self,
        *,
        project: str | None = None,
        owner: str | None = None,
        run_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> float:
        """Cost of attempts within [since, until): billed hours x hourly price x nodes, open
        attempts counted up to now; an attempt straddling a bound counts pro rata."""
        a, r = m.attempts.c, m.runs.c
        q = select(a.started_at, a.ended_at, a.billed_seconds, a.price_usd_per_hour, a.num_nodes)
        q = self._window(q.select_from(m.attempts.join(m.runs)), since, until)
        for col, val in ((r.project, project), (r.owner, owner), (a.run_id, run_id)):
            if val is not None:
                q = q.where(col == val)
        now = self._now()
        with self._read() as c:
            rows = c.execute(q).all()
        return sum(attempt_cost_in_window(*row, now=now, since=since, until=until) for row in rows)

    def project_spend_usd(self, project: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(project=project, since=since, until=until)

    def owner_spend_usd(self, owner: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(owner=owner, since=since, until=until)

    def run_spend_usd(self, run_id: str) -> float:
        return self.spend_usd(run_id=run_id)

    def burn_rate_usd_per_hour(self, *, project: str | None = None, owner: str | None = None) -> float:
        """Sum of hourly prices (x nodes) of the open attempts (for hourly burn limits)."""
        a, r = m.attempts.c, m.runs.c
        q = select(func.coalesce(func.sum(a.price_usd_per_hour * a.num_nodes), 0.0))
        q = q.select_from(m.attempts.join(m.runs)).where(a.ended_at.is_(None))
        if project is not None:
            q = q.where(r.project == project)
        if owner is not None:
            q = q.where(r.owner == owner)
        with self._read() as c:
            return float(c.execute(q).scalar() or 0.0)

    @staticmethod
    def _window(q: Select[Any], since: datetime | None, until: datetime | None) -> Select[Any]:
        """Attempts whose [started_at, ended_at or open) overlaps [since, until)."""
        a = m.attempts.c
        if until is not None:
            q = q.where(a.started_at < until)
        if since is not None:
            q = q.where(or_(a.ended_at.is_(None), a.ended_at >= since))
        return q

    # ---- reports ------------------------------------------------------------------------------
    def attempts_frame(self, since: datetime | None = None, until: datetime | None = None) -> AttemptsFrame:
        """Attempts overlapping [since, until) joined with run fields and tags, column-wise.

        Build a DataFrame with `pandas.DataFrame(frame.columns)`. See AttemptsFrame. Rows are
        in no particular order. Reads every row: for grouped totals over millions of attempts
        use cost_rollup (the database aggregates).
        """
        a, r = m.attempts.c, m.runs.c
        cols = [
            a.attempt_id, a.run_id, a.seq, a.cloud, a.region, a.zone, a.instance_type,
            a.accelerator, a.accelerator_count, a.num_nodes, a.spot, a.price_usd_per_hour,
            a.on_demand_price_usd_per_hour, a.cluster, a.state,
            epoch(a.started_at).label("started_at"), epoch(a.ended_at).label("ended_at"),
            a.end_reason, a.exit_code, a.billed_seconds, r.name.label("run_name"), r.project,
            r.experiment, r.owner, r.cost_center, r.state.label("run_state"),
        ]  # fmt: skip
        q = self._window(select(*cols).select_from(m.attempts.join(m.runs)), since, until)
        run_ids = self._window(select(a.run_id).distinct(), since, until)
        t = m.tags.c
        tq = select(t.entity_id, t.key, t.value).where(t.entity_type == "run", t.entity_id.in_(run_ids))
        as_of = self._now()
        with self._read() as c:
            rows = c.execute(q).all()
            tag_rows = c.execute(tq).all()
        names = [col.key if col.key else col.name for col in q.selected_columns]
        columns: dict[str, list[Any]] = {n: [] for n in names}
        if rows:
            for n, values in zip(names, zip(*rows, strict=True), strict=True):
                columns[n] = list(values)
        columns["spot"] = [bool(v) for v in columns["spot"]]
        tags: dict[str, dict[str, str]] = {}
        for run_id, key, value in tag_rows:
            tags.setdefault(run_id, {})[key] = value
        empty: dict[str, str] = {}
        columns["tags"] = [tags.get(rid, empty) for rid in columns["run_id"]]
        return AttemptsFrame(columns=columns, as_of=as_of)

    def cost_rollup(
        self,
        by: Sequence[str],
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[CostRollupRow]:
        """Cost per group, computed by the database (fast on millions of attempts).

        `by`: any of project, experiment, owner, cost_center, run_id, cloud, region, zone,
        instance_type, accelerator, spot, cluster, day, month, or "tag:KEY" (a run tag).
        Same cost rule as spend_usd (pro rata to [since, until), open attempts up to now);
        day/month are the UTC day/month the attempt started. Sorted by the keys.
        UnknownNameError (bad input) for an unknown key.
        """
        now = self._now()
        q, names = rollup_select(by, now=now, since=since, until=until)
        with self._read() as c:
            rows = c.execute(q).all()
        n = len(names)
        out = []
        for row in rows:
            keys = dict(zip(names, row[:n], strict=True))
            if "spot" in keys and keys["spot"] is not None:
                keys["spot"] = bool(keys["spot"])
            (attempts, preempt, node_h, gpu_h, billed, listed, spot, first, last) = row[n:]
            out.append(
                CostRollupRow(
                    keys=keys, attempts=int(attempts), preemptions=int(preempt or 0),
                    node_hours=float(node_h or 0.0), gpu_hours=float(gpu_h or 0.0),
                    billed_cost_usd=float(billed or 0.0), list_cost_usd=float(listed or 0.0),
                    spot_cost_usd=float(spot or 0.0),
                    first_start=first, last_end=last,
                )  # fmt: skip
            )
        return out

    def run_tags(self, run_ids: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        t = m.tags.c
        q = select(t.entity_id, t.key, t.value).where(t.entity_type == "run")
        if run_ids is not None:
            q = q.where(t.entity_id.in_(list(run_ids)))
        out: dict[str, dict[str, str]] = {}
        with self._read() as c:
            for run_id, key, value in c.execute(q):
                out.setdefault(run_id, {})[key] = value
        return out

    @staticmethod
    def _tags(c: Connection, entity_type: str, ids: list[str]) -> dict[str, dict[str, str]]:
        if not ids:
            return {}
        t = m.tags.c
        q = select(t.entity_id, t.key, t.value).where(t.entity_type == entity_type, t.entity_id.in_(ids))
        out: dict[str, dict[str, str]] = {}
        for entity_id, key, value in c.execute(q):
            out.setdefault(entity_id, {})[key] = value
        return out
