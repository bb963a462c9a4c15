"""Bulk, read-only reads of the ledger's tables for cost reports and spend (the one place that
reads attempts, their event facts, checkpoints, price changes and run tags in bulk).

Each returns a pandas DataFrame built column-wise: the database does the filtering and the
joins, and the DBAPI rows become numpy columns without per-row processing. NULL numbers come
back as -1 (no time, price or duration is negative) so a numeric column converts in C. Times
are float epoch seconds UTC.

A `window` is a launcher.cost.window.Window (timezone-aware datetimes or None at either end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, case, func, literal, or_, select, true
from sqlalchemy.sql.selectable import SelectBase

from launcher.cost.window import Window
from launcher.ledger import arrow_fetch
from launcher.ledger import models as m
from launcher.ledger.records import PREEMPTED_REASONS
from launcher.ledger.types import epoch

NULL = -1.0
EVENT_KINDS = ("teardown", "checkpoint", "recovery", "price")  # the kinds cost facts come from
DETAIL_COLUMNS = (
    "zone", "instance_type", "accelerator", "cluster", "spot", "billing_account_id", "billing_account_name",
)  # for --by attempt and the FOCUS export  # fmt: skip
RUN_KEYS = ("project", "experiment", "owner", "cost_center")


def _num(expr: Any) -> Any:
    return func.coalesce(expr, literal(NULL))


def _columns(rows: list[tuple], names: Sequence[str], numeric: set[str], times: set[str] = frozenset()) -> pd.DataFrame:
    """Rows -> DataFrame: numeric columns via numpy (sentinel -1 -> NaN), `times` (SQLite's
    'YYYY-MM-DD HH:MM:SS.ffffff' text, parsed in C) as epoch seconds, others as objects.
    The rows become one 2-D object array (columns are its slices): transposing with zip(*rows)
    cost more than the fetch itself on a million rows."""
    if rows:
        table = np.empty((len(rows), len(names)), dtype=object)
        table[:] = rows
        cols: list[Any] = [table[:, i] for i in range(len(names))]
    else:
        cols = [np.array([], dtype=object) for _ in names]
    data: dict[str, Any] = {}
    for name, col in zip(names, cols):
        if name in times:
            data[name] = _epoch_of_text(col)
        elif name in numeric:
            arr = np.array(col, dtype="float64")
            arr[arr == NULL] = np.nan
            data[name] = arr
        else:
            data[name] = pd.Series(np.array(col, dtype=object), dtype=object)
    return pd.DataFrame(data, copy=False)


def _epoch_of_text(col: Any) -> np.ndarray:
    """SQLite's 'YYYY-MM-DD HH:MM:SS.ffffff' UTC text (None for NULL) -> float epoch seconds,
    parsed in C by Arrow when it is installed, else by pandas."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        parsed = pd.to_datetime(np.array(col, dtype=object), format="ISO8601")
        us = parsed.as_unit("us").asi8.astype("float64")
        us[np.asarray(parsed.isna())] = np.nan
        return us / 1e6
    text = col if isinstance(col, pa.ChunkedArray | pa.Array) else pa.array(col, type=pa.string())
    us = pc.cast(pc.cast(text, pa.timestamp("us")), pa.int64())
    return np.asarray(pc.divide(pc.cast(us, pa.float64()), 1e6).to_numpy(zero_copy_only=False), dtype="float64")


class _Select:
    """Columns of one bulk query: numbers (NULL -> -1), times and text. Times are the raw column
    on SQLite (parsed by Arrow or pandas: much cheaper than strftime per row) and epoch()
    elsewhere.

    `bulk`: a large read. On PostgreSQL it goes through ADBC into Arrow when the driver is
    installed (arrow_fetch); text then comes back as pandas categoricals. SQLite stays on the
    sqlite3 module: a second SQLite library in the process (ADBC's, connectorx's) shares its
    POSIX locks, which SQLite documents as a way to corrupt a database, and was seen to miss
    commits still in the WAL."""

    def __init__(self, conn: Any, bulk: bool = False) -> None:
        self.sqlite = conn.dialect.name == "sqlite"
        self.bulk = bulk
        self.arrow = bulk and not self.sqlite and arrow_fetch.available(conn.dialect.name)
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
        if self.arrow:
            table = arrow_fetch.fetch_table(conn, stmt)
            if table is not None and table.num_rows > 0:
                return _arrow_columns(table, list(self.cols), self.numeric, self.times)
            if table is not None:
                return _columns([], list(self.cols), self.numeric, self.times)
        return _columns(_fetch(conn, stmt), list(self.cols), self.numeric, self.times)


def _arrow_columns(table: Any, names: Sequence[str], numeric: set[str], times: set[str]) -> pd.DataFrame:
    """An Arrow table of a bulk query -> the same frame as _columns, column-wise in C (numbers'
    -1 as NaN, text as categoricals)."""
    import pyarrow as pa

    data: dict[str, Any] = {}
    for name, col in zip(names, table.columns):
        if name in times:
            data[name] = _epoch_of_text(col)
        elif name in numeric:
            arr = np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype="float64").copy()
            arr[arr == NULL] = np.nan
            data[name] = arr
        elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            data[name] = col.dictionary_encode().to_pandas()
        else:
            data[name] = col.to_pandas()
    return pd.DataFrame(data, copy=False)


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
    window: Window,
    keys: Sequence[str],
    detail: bool,
    *,
    with_ids: bool = False,
    only_ids: Sequence[str] | None = None,
    where: Any = None,
    bulk: bool = False,
) -> pd.DataFrame:
    """Attempts whose billed interval may overlap the window, with their event facts and run
    keys. `bulk`: a large read (see _Select); its `where` may only name attempts columns, as
    the run keys are then joined in pandas (SQLite's per-row lookups into runs cost more than
    reading the runs table whole)."""
    a, r = m.attempts.c, m.runs.c
    ev, agg = _event_facts_columns(conn, a, only_ids)
    q = _Select(conn, bulk)
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
    run_keys = [k for k in RUN_KEYS if k in keys or detail]
    for k in keys:
        if k in RUN_KEYS and not q.bulk:
            q.text(k, getattr(r, k))
        elif k == "region":
            q.text(k, a.region)
    if detail:
        for c in ("attempt_id", "region", "end_reason", *DETAIL_COLUMNS):
            q.text(c, getattr(a, c))
        if not q.bulk:
            for k in RUN_KEYS:
                q.text(k, getattr(r, k))
    elif with_ids:
        q.text("attempt_id", a.attempt_id)
    else:  # only attempts with price history need their id (to apply it)
        q.text("attempt_id", case((ev["n_price"] > 0, a.attempt_id)))
    src = m.attempts if q.bulk else m.attempts.join(m.runs, a.run_id == r.run_id)
    if agg is not None:
        src = src.outerjoin(agg, agg.c.attempt_id == a.attempt_id)
    stmt = q.statement().select_from(src).where(_attempt_window(a, window))
    if only_ids is not None:
        stmt = stmt.where(a.attempt_id.in_(list(only_ids)))
    if where is not None:
        stmt = stmt.where(where)
    df = q.frame(conn, stmt)
    if q.bulk and run_keys:
        runs = read_runs(conn, run_keys)
        pos = positions(runs["run_id"], df["run_id"])
        for k in run_keys:
            df[k] = take(runs[k], pos)
    df["preempted"] = df["preempted"].to_numpy() > 0
    if "spot" in df:
        df["spot"] = df["spot"].astype(bool)
    if detail:  # per-attempt dimensions are copied out row by row: plain objects
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def read_runs(conn: Any, columns: Sequence[str], *, times: Sequence[str] = ()) -> pd.DataFrame:
    """Every run's id with these text columns and time columns (a bulk read)."""
    r = m.runs.c
    q = _Select(conn, True)
    q.text("run_id", r.run_id)
    for c in columns:
        q.text(c, getattr(r, c))
    for c in times:
        q.time(c, getattr(r, c))
    return q.frame(conn, q.statement().select_from(m.runs))


def positions(index: pd.Series, values: pd.Series) -> np.ndarray:
    """Row of each of `values` in the unique `index` (-1 where absent); categoricals are looked
    up once per category."""
    # object Indexes throughout: pandas would otherwise convert a million strings to Arrow ones
    where = pd.Index(np.asarray(index, dtype=object), dtype=object)
    if isinstance(values.dtype, pd.CategoricalDtype):
        cat_pos = where.get_indexer(pd.Index(np.asarray(values.cat.categories, dtype=object), dtype=object))
        codes = values.cat.codes.to_numpy()
        return np.where(codes >= 0, cat_pos[np.maximum(codes, 0)], -1)
    return where.get_indexer(pd.Index(np.asarray(values, dtype=object), dtype=object))


def take(col: pd.Series, pos: np.ndarray) -> pd.Series:
    """col's values at `pos` (-1: missing), keeping a categorical column categorical."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        picked = np.where(pos >= 0, codes[np.maximum(pos, 0)] if len(codes) else -1, -1)
        return pd.Series(pd.Categorical.from_codes(picked, dtype=col.dtype))
    arr = col.to_numpy()
    if arr.dtype.kind == "f":
        return pd.Series(np.where(pos >= 0, arr[np.maximum(pos, 0)] if len(arr) else np.nan, np.nan))
    out = np.full(len(pos), None, dtype=object)
    out[pos >= 0] = arr[pos[pos >= 0]]
    return pd.Series(out, dtype=object)


def read_checkpoints(
    conn: Any,
    window: Window,
    keys: Sequence[str],
    keep_last: int,
    retention_s: float,
    *,
    where: Any = None,
    runs: Sequence[str] | SelectBase | None = None,
    run_ended: bool | None = None,
    bulk: bool = False,
    attempts: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Sized checkpoints that may be stored inside the window, with the time the run's
    keep_last-th next checkpoint replaced them (the database's LEAD window function).
    `run_ended`: only runs that ended (True) or did not (False). `bulk`: a large read (see
    _read_checkpoints_bulk; `attempts`, a frame with attempt_id, cloud and region, saves it
    reading those)."""
    from datetime import timedelta

    a, r, e = m.attempts.c, m.runs.c, m.events.c
    if bulk and where is None:
        return _read_checkpoints_bulk(conn, window, keys, keep_last, retention_s, runs, run_ended, attempts)
    if run_ended is not None:
        where = and_(true() if where is None else where, r.ended_at.is_not(None) if run_ended else r.ended_at.is_(None))
    size = e.data["size_bytes"].as_float()
    later = func.lead(e.at, max(1, keep_last)).over(partition_by=e.run_id, order_by=(e.at, e.id))
    if runs is None:
        conds = [e.kind == "checkpoint"]
    else:  # a few runs: through the (run_id, id) index, not every checkpoint (`kind || ''`)
        chosen = runs if isinstance(runs, SelectBase) else (list(runs) or ["-"])
        conds = [e.run_id.in_(chosen), e.kind.concat("") == "checkpoint"]
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
    q = _Select(conn, bulk)
    q.time("at", inner.c.at)
    q.time("retain_until", inner.c.later)
    q.num("size_bytes", inner.c.size_bytes)
    q.time("run_ended_at", inner.c.run_ended)
    for n in sorted(text):
        q.text(n, inner.c[n])
    return q.frame(conn, q.statement().where(func.coalesce(inner.c.size_bytes, 0) > 0))


def _read_checkpoints_bulk(
    conn: Any,
    window: Window,
    keys: Sequence[str],
    keep_last: int,
    retention_s: float,
    runs: Sequence[str] | None,
    run_ended: bool | None,
    attempts: pd.DataFrame | None,
) -> pd.DataFrame:
    """read_checkpoints for a large ledger, the same rows: one sequential pass over events
    (SQLite's kind index would fetch each checkpoint's row at random), LEAD and the joins to
    runs and attempts in numpy/pandas (per-row lookups into runs cost SQLite more than the
    rest of the read)."""
    e = m.events.c
    q = _Select(conn, True)
    q.text("run_id", e.run_id)
    q.text("attempt_id", e.attempt_id)
    q.time("at", e.at)
    q.num("id", e.id)
    q.num("size_bytes", e.data["size_bytes"].as_float())
    conds = [e.kind.concat("") == "checkpoint"]
    if runs is not None:
        conds.append(e.run_id.in_(list(runs) or ["-"]))
    if window.until is not None:
        conds.append(e.at < window.until)
    ck = q.frame(conn, q.statement().select_from(m.events).where(*conds))

    run_keys = [k for k in RUN_KEYS if k in keys]
    run_rows = read_runs(conn, run_keys, times=("ended_at",))
    rpos = positions(run_rows["run_id"], ck["run_id"])
    run_end = take(run_rows["ended_at"], rpos).to_numpy(dtype="float64")
    keep = rpos >= 0
    if run_ended is not None:
        keep &= ~np.isnan(run_end) if run_ended else np.isnan(run_end)
    if window.since is not None:
        keep &= np.isnan(run_end) | (run_end >= window.since.timestamp() - retention_s)
    ck, rpos, run_end = ck[keep].reset_index(drop=True), rpos[keep], run_end[keep]

    # LEAD(at, keep_last) OVER (PARTITION BY run_id ORDER BY at, id), over every checkpoint
    at = ck["at"].to_numpy(dtype="float64")
    order = np.lexsort((ck["id"].to_numpy(), at, rpos))
    k = max(1, keep_last)
    later = np.full(len(ck), np.nan)
    if len(ck) > k:
        run_sorted, at_sorted = rpos[order], at[order]
        same = run_sorted[k:] == run_sorted[:-k]
        later[order[:-k]] = np.where(same, at_sorted[k:], np.nan)

    out: dict[str, Any] = {
        "at": at, "retain_until": later, "size_bytes": ck["size_bytes"].to_numpy(dtype="float64"),
        "run_ended_at": run_end,
    }  # fmt: skip
    dims = attempts if attempts is not None else pd.DataFrame({"attempt_id": pd.Series(dtype=object)})
    apos = positions(dims["attempt_id"], ck["attempt_id"])
    missing = (apos < 0) & ck["attempt_id"].notna().to_numpy()
    if missing.any():  # attempts the caller did not have: read their cloud and region
        a = m.attempts.c
        ids = pd.unique(np.asarray(ck["attempt_id"], dtype=object)[missing])
        more = _Select(conn, True)
        for c in ("attempt_id", "cloud", "region"):
            more.text(c, getattr(a, c))
        stmt = more.statement().select_from(m.attempts)
        if len(ids) <= 5_000:
            stmt = stmt.where(a.attempt_id.in_([str(i) for i in ids]))
        extra = more.frame(conn, stmt)
        dims = pd.concat([_plain(dims, ("attempt_id", "cloud", "region")), _plain(extra, ("attempt_id", "cloud", "region"))])
        dims = dims.drop_duplicates("attempt_id").reset_index(drop=True)
        apos = positions(dims["attempt_id"], ck["attempt_id"])
    out["cloud"] = take(dims["cloud"], apos) if "cloud" in dims else pd.Series([None] * len(ck), dtype=object)
    for key in keys:
        if key in RUN_KEYS:
            out[key] = take(run_rows[key], rpos)
        elif key == "region":
            out[key] = take(dims["region"], apos) if "region" in dims else pd.Series([None] * len(ck), dtype=object)
        elif key in ("run_id", "attempt_id"):
            out[key] = ck[key]
    df = pd.DataFrame(out)
    sized = np.nan_to_num(df["size_bytes"].to_numpy(dtype="float64"), nan=0.0) > 0
    return df[sized].reset_index(drop=True)


def _plain(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """These columns as plain objects (frames from different reads concatenate cleanly)."""
    return pd.DataFrame({c: pd.Series(np.asarray(df[c], dtype=object) if c in df else None, dtype=object) for c in cols})


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
