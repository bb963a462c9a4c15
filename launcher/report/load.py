"""Bulk reads for reports: read-only SQLAlchemy Core queries against the ledger's tables.

`Ledger.attempts_frame` returns Python lists (fine for thousands of rows); a report over a
million attempts needs fewer columns, times as epoch floats computed by the database, the
events reduced per attempt by the database (one GROUP BY joined to the attempts), and the DBAPI
rows turned into numpy columns without per-row processing. NULL numbers come back as -1 (no
time, price or duration is negative) so a numeric column converts in C.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, case, func, literal, or_, select, true

from launcher.ledger import models as m
from launcher.ledger.types import epoch
from launcher.report.build import KEY_SOURCES, LedgerData
from launcher.report.costs import PREEMPTED_REASONS, EventFacts
from launcher.report.periods import Window

NULL = -1.0
EVENT_KINDS = ("teardown", "checkpoint", "recovery", "price")
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


def _attempt_window(a: Any, window: Window) -> Any:
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


def load_ledger_data(
    ledger: Any,
    window: Window,
    *,
    keys: Sequence[str] = KEY_SOURCES,
    with_tags: bool = False,
    checkpoint_keep_last: int = 3,
    retention_s: float = 7 * 86400.0,
    now: datetime | None = None,
    timings: dict[str, float] | None = None,
    use_cache: bool = False,
) -> LedgerData:
    """Attempts overlapping the window with their run's `keys` and per-attempt event facts,
    plus checkpoint and price rows. `timings`, when given, receives seconds per phase.
    `use_cache`: read through the incremental report cache (see cache.py; not with tags)."""
    as_of = (now or ledger.now()).timestamp()
    detail = "attempt_id" in keys or with_tags
    if use_cache and not with_tags and _have_pyarrow():
        return _load_cached(ledger, window, keys, checkpoint_keep_last, retention_s, as_of, timings)
    t0 = time.perf_counter()
    with ledger.engine.connect() as conn:
        attempts = _attempts(conn, window, keys, detail)
        t1 = time.perf_counter()
        checkpoints = _checkpoints(conn, window, keys, checkpoint_keep_last, retention_s)
        prices = _prices(conn)
        t2 = time.perf_counter()
        if with_tags:
            attempts["tags"] = _run_tags(conn, attempts["run_id"])
    if timings is not None:
        timings["sql_attempts_s"] = t1 - t0
        timings["sql_events_s"] = t2 - t1
    return LedgerData(attempts=attempts, facts=EventFacts(checkpoints=checkpoints, prices=prices), as_of=as_of)


ATTEMPT_EVENT_INDEX_COLUMNS = ["attempt_id", "kind", "at"]


def _have_pyarrow() -> bool:
    """The cache is parquet; without pyarrow (the `report` extra) reports read the ledger."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


ATTEMPT_NUMERIC = (
    "seq", "num_nodes", "accelerator_count", "price_usd_per_hour", "on_demand_price_usd_per_hour",
    "billed_seconds", "started_at", "ended_at", "preempted", "teardown_at", "last_ckpt_at", "resume_at",
    "overhead_s",
)  # fmt: skip
CHECKPOINT_NUMERIC = ("at", "retain_until", "size_bytes", "run_ended_at")


def _load_cached(
    ledger: Any,
    window: Window,
    keys: Sequence[str],
    keep_last: int,
    retention_s: float,
    as_of: float,
    timings: dict[str, float] | None,
) -> LedgerData:
    from launcher.report.cache import ReportCache, default_cache_dir, window_attempts, window_checkpoints

    t0 = time.perf_counter()
    with ledger.engine.connect() as conn:
        prices = _prices(conn)
    key_cols = [k for k in dict.fromkeys(keys) if k not in ("run_id", "cloud", "attempt_id")]
    need_ids = "attempt_id" in keys or len(prices) > 0
    attempt_cols = [*ATTEMPT_NUMERIC, "run_id", "cloud", *key_cols, *(["attempt_id"] if need_ids else [])]
    ck_cols = [*CHECKPOINT_NUMERIC, "cloud", *[k for k in dict.fromkeys(keys) if k != "cloud"]]
    cache = ReportCache(default_cache_dir(ledger.url), keep_last=keep_last, retention_s=retention_s)
    t1 = time.perf_counter()
    all_attempts, all_checkpoints = cache.frames(ledger, attempt_cols, ck_cols)
    t2 = time.perf_counter()
    attempts = window_attempts(all_attempts[attempt_cols], window)
    checkpoints = window_checkpoints(all_checkpoints[ck_cols], window, retention_s)
    if "attempt_id" not in attempts:
        attempts["attempt_id"] = None
    if timings is not None:
        timings["cache_refresh_s"] = t2 - t1
        timings["sql_prices_s"] = t1 - t0
    return LedgerData(attempts=attempts, facts=EventFacts(checkpoints=checkpoints, prices=prices), as_of=as_of)


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


def _attempts(
    conn: Any,
    window: Window,
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


def _checkpoints(
    conn: Any,
    window: Window,
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


def _prices(conn: Any) -> pd.DataFrame:
    e = m.events.c
    q = _Select(conn)
    q.text("attempt_id", e.attempt_id)
    q.time("at", e.at)
    q.num("price_usd_per_hour", e.data["price_usd_per_hour"].as_float())
    return q.frame(conn, q.statement().where(e.kind == "price", e.attempt_id.is_not(None))).dropna()


def _run_tags(conn: Any, run_ids: pd.Series) -> list[dict[str, str]]:
    t = m.tags.c
    rows = conn.execute(select(t.entity_id, t.key, t.value).where(t.entity_type == "run")).all()
    by_run: dict[str, dict[str, str]] = {}
    for rid, k, v in rows:
        by_run.setdefault(rid, {})[k] = v
    empty: dict[str, str] = {}
    return [by_run.get(rid, empty) for rid in run_ids.to_numpy()]
