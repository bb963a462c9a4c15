"""Bulk reads for reports: read-only SQLAlchemy Core queries against the ledger's tables.

`Ledger.attempts_frame` returns Python lists (fine for thousands of rows); a report over a
million attempts needs fewer columns, times as epoch floats computed by the database, events
reduced in SQL, and the DBAPI rows handed to pandas without per-row processing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Text, and_, cast, func, or_, select, true

from launcher.ledger import models as m
from launcher.ledger.types import epoch
from launcher.report.build import LedgerData
from launcher.report.costs import PREEMPTED_REASONS, EventFacts
from launcher.report.periods import Window

ATTEMPT_COLUMNS = (
    "attempt_id", "run_id", "seq", "cloud", "region", "zone", "instance_type", "accelerator",
    "accelerator_count", "num_nodes", "spot", "price_usd_per_hour", "on_demand_price_usd_per_hour",
    "cluster", "end_reason", "billed_seconds",
)  # fmt: skip
RUN_COLUMNS = ("project", "experiment", "owner", "cost_center")


def _frame(conn: Any, stmt: Any, columns: Sequence[str]) -> pd.DataFrame:
    """Execute and build a DataFrame straight from the DBAPI rows (no per-row Python types)."""
    result = conn.execute(stmt)
    rows = result.cursor.fetchall() if result.cursor is not None else []
    result.close()
    return pd.DataFrame.from_records(rows, columns=list(columns), coerce_float=True)


def _attempt_window(a: Any, since: float | None, until: float | None) -> Any:
    """Attempts whose billed interval may overlap [since, until)."""
    conds = []
    if until is not None:
        conds.append(epoch(a.started_at) < until)
    if since is not None:
        conds.append(
            or_(
                a.ended_at.is_(None),
                epoch(a.ended_at) >= since,
                epoch(a.started_at) + func.coalesce(a.billed_seconds, 0.0) >= since,
            )
        )
    return and_(true(), *conds)


def load_ledger_data(
    ledger: Any,
    window: Window,
    *,
    with_tags: bool = False,
    retention_s: float = 7 * 86400.0,
    now: datetime | None = None,
) -> LedgerData:
    """Attempts overlapping the window, with their run's keys, and the event facts."""
    since = window.since.timestamp() if window.since else None
    until = window.until.timestamp() if window.until else None
    as_of = (now or ledger.now()).timestamp()
    a, r, e = m.attempts.c, m.runs.c, m.events.c
    in_window = _attempt_window(a, since, until)
    cols = [getattr(a, c) for c in ATTEMPT_COLUMNS]
    cols += [epoch(a.started_at).label("started_at"), epoch(a.ended_at).label("ended_at")]
    cols += [getattr(r, c) for c in RUN_COLUMNS]
    names = [*ATTEMPT_COLUMNS, "started_at", "ended_at", *RUN_COLUMNS]
    stmt = select(*cols).select_from(m.attempts.join(m.runs, a.run_id == r.run_id)).where(in_window)
    with ledger.engine.connect() as conn:
        attempts = _frame(conn, stmt, names)
        facts = _event_facts(conn, in_window, since, until, retention_s)
        if with_tags:
            attempts["tags"] = _run_tags(conn, attempts["run_id"])
    for c in ("started_at", "ended_at", "billed_seconds", "price_usd_per_hour", "on_demand_price_usd_per_hour"):
        attempts[c] = attempts[c].astype("float64")
    attempts["spot"] = attempts["spot"].astype(bool)
    return LedgerData(attempts=attempts, facts=facts, as_of=as_of)


def _event_facts(conn: Any, in_window: Any, since: float | None, until: float | None, retention_s: float) -> EventFacts:
    a, r, e = m.attempts.c, m.runs.c, m.events.c
    window_attempts = select(a.attempt_id).where(in_window)
    at = epoch(e.at)

    teardown = _frame(
        conn,
        select(e.attempt_id, func.max(at))
        .where(e.kind == "teardown", e.attempt_id.in_(window_attempts))
        .group_by(e.attempt_id),
        ["attempt_id", "teardown_at"],
    ).set_index("attempt_id")

    # restart overhead markers, only for recoveries (seq > 1)
    recoveries = select(a.attempt_id).where(in_window, a.seq > 1)
    recovery = _frame(
        conn,
        select(e.attempt_id, at, e.data["restart_overhead_seconds"].as_float())
        .where(e.kind == "recovery", e.attempt_id.in_(recoveries)),
        ["attempt_id", "at", "overhead_s"],
    )
    recovery = recovery.sort_values("at").groupby("attempt_id").agg(
        resume_at=("at", "first"), overhead_s=("overhead_s", "first")
    )
    running = _running_after_start(conn, in_window)

    # the last checkpoint of preempted attempts (work after it is lost)
    preempted = select(a.attempt_id).where(in_window, a.end_reason.in_(PREEMPTED_REASONS))
    last_ckpt = _frame(
        conn,
        select(e.attempt_id, func.max(at))
        .where(e.kind == "checkpoint", e.attempt_id.in_(preempted))
        .group_by(e.attempt_id),
        ["attempt_id", "last_ckpt_at"],
    ).set_index("attempt_id")

    per_attempt = pd.concat(
        [teardown["teardown_at"], recovery["resume_at"], recovery["overhead_s"], last_ckpt["last_ckpt_at"]],
        axis=1,
    )
    if len(running):
        per_attempt = per_attempt.reindex(per_attempt.index.union(running.index))
        per_attempt["resume_at"] = per_attempt["resume_at"].fillna(running)
    per_attempt = per_attempt.astype("float64")
    per_attempt.index.name = "attempt_id"

    prices = _frame(
        conn,
        select(e.attempt_id, at, e.data["price_usd_per_hour"].as_float())
        .where(e.kind == "price", e.attempt_id.in_(window_attempts)),
        ["attempt_id", "at", "price_usd_per_hour"],
    ).dropna()

    ck_conds = [e.kind == "checkpoint"]
    if until is not None:
        ck_conds.append(at < until)
    if since is not None:
        ck_conds.append(or_(r.ended_at.is_(None), epoch(r.ended_at) + retention_s >= since))
    ck_cols = ["attempt_id", "run_id", "at", "size_bytes", "run_ended_at", "cloud", "region", *RUN_COLUMNS]
    checkpoints = _frame(
        conn,
        select(
            e.attempt_id, e.run_id, at, e.data["size_bytes"].as_float(), epoch(r.ended_at),
            a.cloud, a.region, r.project, r.experiment, r.owner, r.cost_center,
        )  # fmt: skip
        .select_from(m.events.join(m.runs, e.run_id == r.run_id).outerjoin(m.attempts, e.attempt_id == a.attempt_id))
        .where(*ck_conds),
        ck_cols,
    )
    for c in ("at", "size_bytes", "run_ended_at"):
        checkpoints[c] = checkpoints[c].astype("float64")
    checkpoints = checkpoints[checkpoints["size_bytes"].fillna(0) > 0].reset_index(drop=True)
    return EventFacts(per_attempt=per_attempt, checkpoints=checkpoints, prices=prices)


def _running_after_start(conn: Any, in_window: Any) -> pd.Series:
    """For recovery attempts: the run's first `state_change` to running at or after the start."""
    a, e = m.attempts.c, m.events.c
    rec = _frame(
        conn,
        select(a.attempt_id, a.run_id, epoch(a.started_at)).where(in_window, a.seq > 1),
        ["attempt_id", "run_id", "started_at"],
    )
    if rec.empty:
        return pd.Series(dtype="float64")
    changes = _frame(
        conn,
        select(e.run_id, epoch(e.at), e.data["to"].as_string())
        .where(e.kind == "state_change", e.run_id.in_(select(a.run_id).where(in_window, a.seq > 1)))
        .where(cast(e.data, Text).like('%running%')),
        ["run_id", "at", "to"],
    )
    changes = changes[changes["to"] == "running"]
    if changes.empty:
        return pd.Series(dtype="float64")
    rec["started_at"] = rec["started_at"].astype("float64")
    changes["at"] = changes["at"].astype("float64")
    merged = pd.merge_asof(
        rec.sort_values("started_at"),
        changes.sort_values("at")[["run_id", "at"]],
        left_on="started_at",
        right_on="at",
        by="run_id",
        direction="forward",
    )
    return merged.set_index("attempt_id")["at"].dropna()


def _run_tags(conn: Any, run_ids: pd.Series) -> list[dict[str, str]]:
    t = m.tags.c
    rows = conn.execute(select(t.entity_id, t.key, t.value).where(t.entity_type == "run")).all()
    by_run: dict[str, dict[str, str]] = {}
    for rid, k, v in rows:
        by_run.setdefault(rid, {})[k] = v
    empty: dict[str, str] = {}
    return [by_run.get(rid, empty) for rid in run_ids.to_numpy()]
