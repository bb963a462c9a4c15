"""What callers may ask of the ledger, as typed interfaces: `LedgerReader` (runs, attempts,
events, clusters, spend) and `LedgerWriter` (everything that records). `launcher.ledger.Ledger`
implements both; test doubles implement what they need. Importing this module is light (no
SQLAlchemy)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from launcher.ledger.records import (
    AttemptRecord,
    AttemptState,
    ClusterRecord,
    EventRecord,
    NewAttempt,
    ReapAuditRecord,
    RunRecord,
)


@runtime_checkable
class LedgerReader(Protocol):
    def get_run(self, run_id: str) -> RunRecord: ...

    def find_run(self, prefix: str, *, projects: Collection[str] | None = None) -> RunRecord: ...

    def list_runs(
        self,
        *,
        state: str | Collection[str] | None = None,
        project: str | None = None,
        owner: str | None = None,
        since: datetime | None = None,
        limit: int | None = 100,
    ) -> list[RunRecord]: ...

    def get_attempt(self, attempt_id: str) -> AttemptRecord: ...

    def attempts(self, run_id: str) -> list[AttemptRecord]: ...

    def open_attempts(self, *, run_id: str | None = None, cluster: str | None = None) -> list[AttemptRecord]: ...

    def ended_spot_attempts(self, *, since: datetime, limit: int = 5000) -> list[AttemptRecord]: ...

    def recent_events(self, kind: str, *, since: datetime, limit: int = 5000) -> list[EventRecord]: ...

    def events(
        self, run_id: str, *, kind: str | Collection[str] | None = None, after_id: int | None = None
    ) -> list[EventRecord]: ...

    def get_cluster(self, name: str) -> ClusterRecord: ...

    def clusters(
        self,
        *,
        state: str | Collection[str] | None = None,
        provider: str | None = None,
        run_id: str | None = None,
    ) -> list[ClusterRecord]: ...

    def last_heartbeat(self, *, run_id: str | None = None, cluster: str | None = None) -> datetime | None: ...

    def run_spend_usd(self, run_id: str) -> float: ...


@runtime_checkable
class LedgerWriter(LedgerReader, Protocol):
    def now(self) -> datetime: ...

    def transaction(self) -> AbstractContextManager[None]:
        """Writes (and reads) inside the block land together or not at all."""
        ...

    def create_run(self, run: RunRecord, tags: Mapping[str, str] | None = None) -> RunRecord: ...

    def set_run_state(
        self,
        run_id: str,
        state: str,
        *,
        reason: str | None = None,
        expected_from: str | Collection[str] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> RunRecord: ...

    def set_run_tags(self, run_id: str, tags: Mapping[str, str]) -> None: ...

    def add_attempt(
        self, run_id: str, attempt: NewAttempt, *, state: str = AttemptState.PROVISIONING, started_at: datetime | None = None
    ) -> AttemptRecord: ...

    def set_attempt_state(self, attempt_id: str, state: str, *, cluster: str | None = None) -> AttemptRecord: ...

    def end_attempt(
        self,
        attempt_id: str,
        end_reason: str,
        *,
        exit_code: int | None = None,
        ended_at: datetime | None = None,
        billed_seconds: float | None = None,
    ) -> AttemptRecord: ...

    def add_event(
        self,
        run_id: str,
        kind: str,
        data: Mapping[str, Any] | None = None,
        *,
        attempt_id: str | None = None,
        at: datetime | None = None,
    ) -> EventRecord: ...

    def upsert_cluster(self, cluster: ClusterRecord) -> ClusterRecord: ...

    def set_cluster_state(self, name: str, state: str) -> ClusterRecord: ...

    def heartbeat(self, *, run_id: str | None = None, cluster: str | None = None, at: datetime | None = None) -> None: ...

    def record_reap_many(self, entries: Sequence[ReapAuditRecord]) -> int: ...
