"""The Ledger: the one read/write API over the ledger database (SQLite or PostgreSQL).

Every write is its own short transaction, committed before the method returns, so the caller
(e.g. the controller, which records each transition BEFORE acting on it) can rely on it after a
crash. Opening a Ledger upgrades the schema to head under a lock (see engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from launcher.ledger.records import (
    AttemptRecord,
    AttemptsFrame,
    ClusterRecord,
    EventRecord,
    NewAttempt,
    ReapAuditRecord,
    RunRecord,
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Ledger:
    """Open (and migrate) the ledger at `url` (default: `launcher.paths.db_url()`).

    `now` is the clock used for every timestamp the ledger sets (inject it in tests).
    A Ledger is cheap to keep for the life of a process; call `close()` (or use it as a
    context manager) to release the connection pool. Not shared across fork(): open one per
    process.
    """

    def __init__(self, url: str | None = None, *, now: Callable[[], datetime] = utc_now) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- runs ---------------------------------------------------------------------------------
    def create_run(self, run: RunRecord, tags: Mapping[str, str] | None = None) -> RunRecord:
        """Insert a run and its tags (`tags` merged over `run.tags`) in one transaction.

        created_at/updated_at come from the clock unless `run.created_at` is set.
        Raises ConflictError when the run_id exists.
        """
        raise NotImplementedError

    def get_run(self, run_id: str) -> RunRecord:
        """Raises NotFoundError."""
        raise NotImplementedError

    def find_run(self, prefix: str) -> RunRecord:
        """The run whose id is `prefix` or starts with it (also matches a unique run name).

        Raises NotFoundError when none matches, BadInputError (listing candidates) when several do.
        """
        raise NotImplementedError

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
        raise NotImplementedError

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
        state sets ended_at and end_reason (= reason). NotFoundError when the run is unknown.
        """
        raise NotImplementedError

    def set_run_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Upsert tags on a run (existing keys are overwritten)."""
        raise NotImplementedError

    # ---- attempts -----------------------------------------------------------------------------
    def add_attempt(
        self,
        run_id: str,
        attempt: NewAttempt,
        *,
        state: str = "provisioning",
        started_at: datetime | None = None,
    ) -> AttemptRecord:
        """Start attempt seq = previous + 1 (safe under concurrent callers for the same run).

        Billing starts at `started_at` (default: now). NotFoundError when the run is unknown.
        """
        raise NotImplementedError

    def set_attempt_state(self, attempt_id: str, state: str, *, cluster: str | None = None) -> AttemptRecord:
        """Move an open attempt to `state` (e.g. setup -> running); optionally record its cluster.

        ConflictError when the attempt has already ended.
        """
        raise NotImplementedError

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
        raise NotImplementedError

    def get_attempt(self, attempt_id: str) -> AttemptRecord:
        raise NotImplementedError

    def attempts(self, run_id: str) -> list[AttemptRecord]:
        """A run's attempts in seq order."""
        raise NotImplementedError

    def open_attempts(
        self, *, run_id: str | None = None, cluster: str | None = None
    ) -> list[AttemptRecord]:
        """Attempts not yet ended (for crash cleanup and the reaper's 'no running attempt')."""
        raise NotImplementedError

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
        raise NotImplementedError

    def events(
        self,
        run_id: str,
        *,
        kind: str | Collection[str] | None = None,
        after_id: int | None = None,
    ) -> list[EventRecord]:
        """A run's events in insertion order; `after_id` for incremental tailing."""
        raise NotImplementedError

    # ---- clusters -----------------------------------------------------------------------------
    def upsert_cluster(self, cluster: ClusterRecord) -> ClusterRecord:
        """Insert or update by name (tags merged). created_at is kept from the first insert;
        entering state 'terminated' sets terminated_at (now unless given)."""
        raise NotImplementedError

    def set_cluster_state(self, name: str, state: str) -> ClusterRecord:
        raise NotImplementedError

    def get_cluster(self, name: str) -> ClusterRecord:
        """Raises NotFoundError."""
        raise NotImplementedError

    def clusters(
        self,
        *,
        state: str | Collection[str] | None = None,
        provider: str | None = None,
        run_id: str | None = None,
    ) -> list[ClusterRecord]:
        raise NotImplementedError

    # ---- heartbeats ---------------------------------------------------------------------------
    def heartbeat(
        self, *, run_id: str | None = None, cluster: str | None = None, at: datetime | None = None
    ) -> None:
        """Record that the run and/or cluster is alive now (keeps only the latest beat)."""
        raise NotImplementedError

    def last_heartbeat(self, *, run_id: str | None = None, cluster: str | None = None) -> datetime | None:
        """Exactly one of run_id / cluster."""
        raise NotImplementedError

    # ---- reaper audit -------------------------------------------------------------------------
    def record_reap(self, entry: ReapAuditRecord) -> ReapAuditRecord:
        """Append one audit row (at = now unless given); returns it with id and at set."""
        raise NotImplementedError

    def reap_audit(
        self,
        *,
        since: datetime | None = None,
        instance_id: str | None = None,
        provider: str | None = None,
        pass_id: str | None = None,
        limit: int | None = None,
    ) -> list[ReapAuditRecord]:
        """Oldest first."""
        raise NotImplementedError

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
        raise NotImplementedError

    def project_spend_usd(self, project: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(project=project, since=since, until=until)

    def owner_spend_usd(self, owner: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(owner=owner, since=since, until=until)

    def run_spend_usd(self, run_id: str) -> float:
        return self.spend_usd(run_id=run_id)

    def burn_rate_usd_per_hour(self, *, project: str | None = None, owner: str | None = None) -> float:
        """Sum of hourly prices (x nodes) of the open attempts (for hourly burn limits)."""
        raise NotImplementedError

    # ---- reports ------------------------------------------------------------------------------
    def attempts_frame(self, since: datetime | None = None, until: datetime | None = None) -> AttemptsFrame:
        """Attempts overlapping [since, until) joined with run fields and tags, column-wise.

        Build a DataFrame with `pandas.DataFrame(frame.columns)`. See AttemptsFrame.
        """
        raise NotImplementedError

    def run_tags(self, run_ids: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        raise NotImplementedError
