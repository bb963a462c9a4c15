"""Bulk, read-only reads of the ledger's tables for cost reports and spend (the one place that
reads attempts, their event facts, checkpoints, price changes and run tags in bulk).

Each returns a pandas DataFrame built column-wise: the database does the filtering and the
joins, and the DBAPI rows become numpy columns without per-row processing. NULL numbers come
back as -1 (no time, price or duration is negative) so a numeric column converts in C. Times
are float epoch seconds UTC.

A `window` is any object with `since` and `until` (timezone-aware datetimes or None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, case, func, literal, or_, select, true

from launcher.ledger import models as m
from launcher.ledger.types import epoch

PREEMPTED_REASONS = ("preempted", "node_lost")
NULL = -1.0
EVENT_KINDS = ("teardown", "checkpoint", "recovery", "price")  # the kinds cost facts come from
DETAIL_COLUMNS = ("zone", "instance_type", "accelerator", "cluster", "spot")  # for --by attempt
RUN_KEYS = ("project", "experiment", "owner", "cost_center")


def _num(expr: Any) -> Any:
    return func.coalesce(expr, literal(NULL))


def _columns(rows: list[tuple], names: Sequence[str], numeric: set[str], times: set[str] = frozenset()) -> pd.DataFrame:
    """Rows -> DataFrame: numeric columns via numpy (sentinel -1 -> NaN), `times` (SQLite's
    'YYYY-MM-DD HH:MM:SS.ffffff' text, parsed by pandas in C) as epoch seconds, others as objects."""
    cols = list(zip(*rows)) if rows else [() for _ in names]
    data: dict[str, Any] = {}
    for name, col in zip(names, cols):
        if name in times:
            parsed = pd.to_datetime(np.array(col, dtype=object), format="ISO8601")
            us = parsed.as_unit("us").asi8.astype("float64")
            us[np.asarray(parsed.isna())] = np.nan
            data[name] = us / 1e6
        elif name in numeric:
            arr = np.array(col, dtype="float64")
            arr[arr == NULL] = np.nan
            data[name] = arr
        else:
            data[name] = pd.Series(np.array(col, dtype=object), dtype=object)
    return pd.DataFrame(data, copy=False)


class _Select:
    """Columns of one bulk query: numbers (NULL -> -1), times and text. Times are the raw column
    on SQLite (parsed by pandas: much cheaper than strftime per row) and epoch() elsewhere."""

    def __init__(self, conn: Any) -> None:
        self.sqlite = conn.dialect.name == "sqlite"
        self.cols: dict[str, Any] = {}
        self.numeric: set[str] = set()
        self.times: set[str] = set()

    def num(self, name: str, expr: Any) -> None:
        self.cols[name] = _num(expr)
        self.numeric.add(name)

    def time(self, name: str, expr: Any) -> None:
        if self.sqlite:
            self.cols[name] = expr
            self.times.add(name)
        else:
            self.num(name, epoch(expr))

    def text(self, name: str, expr: Any) -> None:
        self.cols[name] = expr

    def statement(self) -> Any:
        return select(*[c.label(n) for n, c in self.cols.items()])

    def frame(self, conn: Any, stmt: Any) -> pd.DataFrame:
        return _columns(_fetch(conn, stmt), list(self.cols), self.numeric, self.times)


def _fetch(conn: Any, stmt: Any) -> list[tuple]:
    result = conn.execute(stmt)
    try:
        return result.cursor.fetchall() if result.cursor is not None else []
    finally:
        result.close()


def _attempt_window(a: Any, window: Any) -> Any:
    """Attempts whose billed interval may overlap [since, until) (typed comparisons: indexes)."""
    conds = []
    if window.until is not None:
        conds.append(a.started_at < window.until)
    if window.since is not None:
        conds.append(
            or_(
                a.ended_at.is_(None),
                a.ended_at >= window.since,
                epoch(a.started_at) + func.coalesce(a.billed_seconds, 0.0) >= window.since.timestamp(),
            )
        )
    return and_(true(), *conds)


ATTEMPT_EVENT_INDEX_COLUMNS = ["attempt_id", "kind", "at"]


def has_attempt_event_index(conn: Any) -> bool:
    """Whether events has an index led by (attempt_id, kind[, at]): then per-attempt lookups are
    cheap and correlated subqueries beat one big GROUP BY joined back (3-4x on SQLite)."""
    from sqlalchemy import inspect

    for ix in inspect(conn).get_indexes("events"):
        if list(ix.get("column_names") or [])[:2] == ATTEMPT_EVENT_INDEX_COLUMNS[:2]:
            return True
    return False


def _event_facts_columns(conn: Any, a: Any, only_ids: Sequence[str] | None = None) -> tuple[dict[str, Any], Any]:
    """Per-attempt event facts as column expressions, and the FROM clause to outer-join (or None).

    Ended attempts read their row of attempt_facts (written by the ledger when they ended: one
    row per attempt, no pass over the events); open attempts, and the few attempts of
    `only_ids` (the cache's incremental refresh), look their events up."""
    ev = m.events.alias("ev")

    def one(fn: Any, kind: str, col: Any) -> Any:
        return (
            select(fn(col))
            # the run id lets the (run_id, id) index find a run's few events; `kind || ''` keeps
            # SQLite off the (kind, at) index, which would walk every event of that kind
            .where(ev.c.run_id == a.run_id, ev.c.attempt_id == a.attempt_id, ev.c.kind.concat("") == kind)
            .scalar_subquery()
        )

    lookups = {
        "teardown": one(func.max, "teardown", ev.c.at),
        "last_ckpt": one(func.max, "checkpoint", ev.c.at),
        "resume": one(func.min, "recovery", ev.c.at),
        "overhead": one(func.max, "recovery", ev.c.data["restart_overhead_seconds"].as_float()),
        "n_price": one(func.count, "price", ev.c.id),
    }
    if only_ids is not None:
        return lookups, None
    f = m.attempt_facts.alias("f")
    stored = {
        "teardown": f.c.teardown_at, "last_ckpt": f.c.last_ckpt_at, "resume": f.c.resume_at,
        "overhead": f.c.overhead_s, "n_price": f.c.n_price,
    }  # fmt: skip
    # CASE evaluates a lookup only for the attempts it applies to (open, or ended before facts)
    lookup_needed = or_(a.ended_at.is_(None), f.c.attempt_id.is_(None))
    return {k: case((lookup_needed, lookups[k]), else_=stored[k]) for k in lookups}, f


def read_attempts(
    conn: Any,
    window: Any,
    keys: Sequence[str],
    detail: bool,
    *,
    with_ids: bool = False,
    only_ids: Sequence[str] | None = None,
    where: Any = None,
) -> pd.DataFrame:
    a, r = m.attempts.c, m.runs.c
    ev, agg = _event_facts_columns(conn, a, only_ids)
    q = _Select(conn)
    for name in ("seq", "num_nodes", "accelerator_count", "price_usd_per_hour", "on_demand_price_usd_per_hour", "billed_seconds"):
        q.num(name, getattr(a, name))
    q.time("started_at", a.started_at)
    q.time("ended_at", a.ended_at)
    q.num("preempted", case((a.end_reason.in_(PREEMPTED_REASONS), 1.0), else_=0.0))
    q.time("teardown_at", ev["teardown"])
    q.time("last_ckpt_at", ev["last_ckpt"])
    q.time("resume_at", ev["resume"])
    q.num("overhead_s", ev["overhead"])
    q.text("run_id", a.run_id)
    q.text("cloud", a.cloud)
    for k in keys:
        if k in RUN_KEYS:
            q.text(k, getattr(r, k))
        elif k == "region":
            q.text(k, a.region)
    if detail:
        for c in ("attempt_id", "region", "end_reason", *DETAIL_COLUMNS):
            q.text(c, getattr(a, c))
        for k in RUN_KEYS:
            q.text(k, getattr(r, k))
    elif with_ids:
        q.text("attempt_id", a.attempt_id)
    else:  # only attempts with price history need their id (to apply it)
        q.text("attempt_id", case((ev["n_price"] > 0, a.attempt_id)))
    src = m.attempts.join(m.runs, a.run_id == r.run_id)
    if agg is not None:
        src = src.outerjoin(agg, agg.c.attempt_id == a.attempt_id)
    stmt = q.statement().select_from(src).where(_attempt_window(a, window))
    if only_ids is not None:
        stmt = stmt.where(a.attempt_id.in_(list(only_ids)))
    if where is not None:
        stmt = stmt.where(where)
    df = q.frame(conn, stmt)
    df["preempted"] = df["preempted"].to_numpy() > 0
    if "spot" in df:
        df["spot"] = df["spot"].astype(bool)
    return df


def read_checkpoints(
    conn: Any,
    window: Any,
    keys: Sequence[str],
    keep_last: int,
    retention_s: float,
    *,
    where: Any = None,
    runs: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sized checkpoints that may be stored inside the window, with the time the run's
    keep_last-th next checkpoint replaced them (the database's LEAD window function)."""
    from datetime import timedelta

    a, r, e = m.attempts.c, m.runs.c, m.events.c
    size = e.data["size_bytes"].as_float()
    later = func.lead(e.at, max(1, keep_last)).over(partition_by=e.run_id, order_by=(e.at, e.id))
    if runs is None:
        conds = [e.kind == "checkpoint"]
    else:  # a few runs: through the (run_id, id) index, not every checkpoint (`kind || ''`)
        conds = [e.run_id.in_(list(runs) or ["-"]), e.kind.concat("") == "checkpoint"]
    if window.until is not None:
        conds.append(e.at < window.until)
    if window.since is not None:
        conds.append(or_(r.ended_at.is_(None), r.ended_at >= window.since - timedelta(seconds=retention_s)))
    if where is not None:
        conds.append(where)
    inner_cols = [e.at.label("at"), later.label("later"), size.label("size_bytes"), r.ended_at.label("run_ended"), a.cloud.label("cloud")]
    text = {"cloud"}
    for k in keys:
        if k in RUN_KEYS:
            inner_cols.append(getattr(r, k).label(k))
        elif k == "region":
            inner_cols.append(a.region.label("region"))
        elif k == "run_id":
            inner_cols.append(e.run_id.label("run_id"))
        elif k == "attempt_id":
            inner_cols.append(e.attempt_id.label("attempt_id"))
        elif k == "cloud":
            continue
        text.add(k)
    inner = (
        select(*inner_cols)
        .select_from(m.events.join(m.runs, e.run_id == r.run_id).outerjoin(m.attempts, e.attempt_id == a.attempt_id))
        .where(*conds)
        .subquery("ck")
    )
    q = _Select(conn)
    q.time("at", inner.c.at)
    q.time("retain_until", inner.c.later)
    q.num("size_bytes", inner.c.size_bytes)
    q.time("run_ended_at", inner.c.run_ended)
    for n in sorted(text):
        q.text(n, inner.c[n])
    return q.frame(conn, q.statement().where(func.coalesce(inner.c.size_bytes, 0) > 0))


def read_prices(conn: Any, *, attempt_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Price changes (attempt_id, at, price_usd_per_hour), of these attempts or all."""
    e = m.events.c
    q = _Select(conn)
    q.text("attempt_id", e.attempt_id)
    q.time("at", e.at)
    q.num("price_usd_per_hour", e.data["price_usd_per_hour"].as_float())
    stmt = q.statement().where(e.kind == "price", e.attempt_id.is_not(None))
    if attempt_ids is not None:
        if len(attempt_ids) > 5_000:  # a long IN list costs more than reading them all
            return read_prices(conn).pipe(lambda p: p[p["attempt_id"].isin(attempt_ids)].reset_index(drop=True))
        stmt = stmt.where(e.attempt_id.in_(list(attempt_ids) or ["-"]))
    return q.frame(conn, stmt).dropna()


def read_run_tags(conn: Any, run_ids: pd.Series) -> list[dict[str, str]]:
    t = m.tags.c
    rows = conn.execute(select(t.entity_id, t.key, t.value).where(t.entity_type == "run")).all()
    by_run: dict[str, dict[str, str]] = {}
    for rid, k, v in rows:
        by_run.setdefault(rid, {})[k] = v
    empty: dict[str, str] = {}
    return [by_run.get(rid, empty) for rid in run_ids.to_numpy()]
