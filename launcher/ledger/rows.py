"""Row <-> record conversion and small portable SQL helpers used by the store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Row, Table, delete

from launcher.ledger import models as m
from launcher.ledger.records import AttemptRecord, ClusterRecord, EventRecord, ReapAuditRecord, RunRecord

RUN_FIELDS = tuple(c.name for c in m.runs.columns)
ATTEMPT_FIELDS = tuple(c.name for c in m.attempts.columns)


def jsonable(data: Any) -> Any:
    """Plain JSON values (datetimes and other objects become strings) so a write never fails
    half-way on an odd value."""
    return json.loads(json.dumps(data, default=str))


def run_from_row(row: Row[Any], tags: Mapping[str, str] | None = None) -> RunRecord:
    d = row._mapping
    return RunRecord(**{f: d[f] for f in RUN_FIELDS}, tags=dict(tags or {}))


def attempt_from_row(row: Row[Any]) -> AttemptRecord:
    d = row._mapping
    return AttemptRecord(**{f: d[f] for f in ATTEMPT_FIELDS})


def event_from_row(row: Row[Any]) -> EventRecord:
    d = row._mapping
    return EventRecord(
        id=d["id"], run_id=d["run_id"], attempt_id=d["attempt_id"], at=d["at"], kind=d["kind"],
        data=d["data"] or {},
    )  # fmt: skip


def cluster_from_row(row: Row[Any], tags: Mapping[str, str] | None = None) -> ClusterRecord:
    d = row._mapping
    return ClusterRecord(
        name=d["name"], provider=d["provider"], region=d["region"], zone=d["zone"],
        stack=d["stack"], state=d["state"], run_id=d["run_id"], project=d["project"],
        nodes=list(d["nodes"] or []), created_at=d["created_at"], updated_at=d["updated_at"],
        terminated_at=d["terminated_at"], tags=dict(tags or {}),
    )  # fmt: skip


def reap_from_row(row: Row[Any]) -> ReapAuditRecord:
    d = row._mapping
    return ReapAuditRecord(
        id=d["id"], at=d["at"], pass_id=d["pass_id"], provider=d["provider"], region=d["region"],
        instance_id=d["instance_id"], cluster=d["cluster"], project=d["project"],
        decision=d["decision"], action=d["action"], reasons=list(d["reasons"] or []),
        hourly_price_usd=d["hourly_price_usd"], estimated_saving_usd=d["estimated_saving_usd"],
        ok=d["ok"], error=d["error"], dry_run=d["dry_run"],
    )  # fmt: skip


def upsert(
    conn: Connection, table: Table, rows: list[dict[str, Any]], keys: Iterable[str], update: Iterable[str]
) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE SET update (SQLite and PostgreSQL)."""
    if not rows:
        return
    # Imported here: PostgreSQL's dialect costs a SQLite ledger ~30 ms of import on every command.
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        from sqlalchemy.dialects.postgresql import insert
    stmt = insert(table).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(keys), set_={c: stmt.excluded[c] for c in update}
    )
    conn.execute(stmt)


def write_tags(conn: Connection, entity_type: str, entity_id: str, tags: Mapping[str, str]) -> None:
    rows = []
    for k, v in tags.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"tag keys must be non-empty strings, got {k!r}")
        rows.append({"entity_type": entity_type, "entity_id": entity_id, "key": k, "value": str(v)})
    upsert(conn, m.tags, rows, keys=("entity_type", "entity_id", "key"), update=("value",))


def delete_tags(conn: Connection, entity_type: str, entity_id: str) -> None:
    t = m.tags
    conn.execute(delete(t).where(t.c.entity_type == entity_type, t.c.entity_id == entity_id))
