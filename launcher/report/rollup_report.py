"""A grouped report from the cost rollup: runs wholly inside the window are summed by the
database (launcher/ledger/rollup_reads.py); the rest (running runs, runs crossing the window's
edges, runs not rolled up) are read attempt by attempt and grouped as report_from_data does;
the two sets of runs are disjoint, so their groups add up, distinct-run counts included.

Used for grouped reports with the default checkpoint assumptions (the rollup's storage is
written with them); `--no-cache` reads the whole ledger instead, and the tests check both
give the same report."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from launcher.cost.window import Window
from launcher.ledger import models as m
from launcher.ledger.attempt_cost import CostAssumptions, EventFacts, attempt_intervals
from launcher.ledger.readers import read_attempts, read_checkpoints, read_prices
from launcher.ledger.rollup import ROLLUP_KEEP_LAST, ROLLUP_RETENTION_S
from launcher.ledger.rollup_reads import GROUP_COLUMNS, detail_runs, first_start, read_rollup_groups
from launcher.report.build import (
    _SUMS,
    NONE_LABEL,
    ReportQuery,
    ReportResult,
    _edges,
    build_report,
    finish_report,
    grouped_segments,
)
from launcher.report.data import LedgerData

MAX_IDS = 5_000  # more runs to read attempt by attempt: select them by the query instead of a list


def build_grouped_report(
    ledger: Any,
    query: ReportQuery,
    *,
    now: datetime | None = None,
    extra_keys: Sequence[str] = (),
    use_cache: bool = False,
    use_rollup: bool = True,
) -> ReportResult:
    """The report from the ledger's cost rollup where it applies (`use_rollup`), else
    build_report (through the incremental report cache with `use_cache`)."""
    if use_rollup and rollup_applies(query, tuple(extra_keys)):
        return report_from_rollup(ledger, query, now=now)
    return build_report(ledger, query, now=now, extra_keys=extra_keys, use_cache=use_cache)


def rollup_applies(query: ReportQuery, extra_keys: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether the rollup can answer this report: grouped keys, by month or not by time (its rows
    are monthly), the default checkpoint rules."""
    a = query.assumptions
    return (
        not extra_keys
        and "day" not in query.by
        and "attempt" not in query.by
        and not query.tight_periods
        and a.checkpoint_keep_last == ROLLUP_KEEP_LAST
        and a.checkpoint_retention_after_run_s == ROLLUP_RETENTION_S
        and all(src in GROUP_COLUMNS for src, _ in query.key_specs)
    )


def report_from_rollup(ledger: Any, query: ReportQuery, *, now: datetime | None = None) -> ReportResult:
    a: CostAssumptions = query.assumptions
    as_of = (now or ledger.now()).timestamp()
    time_key = query.time_key
    keys = list(dict.fromkeys(src for src, _ in query.key_specs))
    w = query.window
    with ledger.engine.connect() as conn:
        since = w.since.timestamp() if w.since is not None else first_start(conn, w.until)
        if since is None:
            since = as_of
        horizon = min(w.until.timestamp(), as_of) if w.until is not None else as_of
        inside = read_rollup_groups(
            conn, keys, time_key == "month", since, horizon, a.storage_usd_per_gb_month, a.default_storage_usd_per_gb_month
        )
        runs: Any = detail_runs(since, w.until.timestamp() if w.until is not None else None, horizon)
        ids = conn.execute(runs).scalars().all()  # usually few: read them by id, not by the query again
        if len(ids) <= MAX_IDS:
            runs = sorted(ids) or ["-"]
        window = Window(datetime.fromtimestamp(since, UTC), w.until)
        attempts = read_attempts(conn, window, keys, False, where=m.attempts.c.run_id.in_(runs))
        checkpoints = read_checkpoints(conn, window, keys, a.checkpoint_keep_last, a.checkpoint_retention_after_run_s, runs=runs)
        prices = read_prices(conn)
    data = LedgerData(attempts=attempts, facts=EventFacts(checkpoints=checkpoints, prices=prices), as_of=as_of)
    iv = attempt_intervals(attempts.reset_index(drop=True), data.facts, as_of)
    if w.until is not None:
        until = w.until.timestamp()
    else:
        ends = [as_of]  # as report_from_data: the clock or the last bill end, whichever is later
        if len(iv):
            ends.append(float(iv["bill_end"].max()))
        if len(inside) and inside["compute_end"].notna().any():
            ends.append(float(inside["compute_end"].max()))
        until = max(ends)
    until = max(until, since)
    edges = _edges(time_key, since, until)
    detail = grouped_segments(data, query, iv, edges, until)
    out = _merge(_as_groups(inside, keys, edges), detail, keys, time_key is not None)
    return finish_report(out, None, query, edges, since, until, as_of=as_of)


def _as_groups(inside: pd.DataFrame, keys: list[str], edges: np.ndarray) -> pd.DataFrame:
    """The database's groups in grouped_segments' shape: keys with NONE_LABEL for NULL, the
    bucket as an index into `edges`."""
    out = pd.DataFrame({k: np.where(pd.isna(v := inside[k].astype(object)), NONE_LABEL, v) for k in keys})
    if "_bucket_start" in inside:
        starts = np.maximum(inside["_bucket_start"].to_numpy(dtype="float64"), edges[0])
        out["_bucket"] = np.clip(np.searchsorted(edges, starts, side="right") - 1, 0, len(edges) - 2)
    for name in (*_SUMS, "seg_start", "seg_end", "x_Runs"):
        out[name] = inside[name].to_numpy(dtype="float64") if name in inside else np.zeros(len(inside))
    return out


def _merge(inside: pd.DataFrame, detail: pd.DataFrame, keys: list[str], bucketed: bool) -> pd.DataFrame:
    if len(inside) == 0:
        return detail
    if len(detail) == 0:
        return inside
    by = [*keys, *(["_bucket"] if bucketed else [])]
    both = pd.concat([inside, detail[inside.columns]], ignore_index=True)
    if not by:
        both["_all"] = 0
        by = ["_all"]
    agg = {name: "sum" for name in (*_SUMS, "x_Runs")}
    agg.update(seg_start="min", seg_end="max")
    out = both.groupby(by, sort=False, dropna=False).agg(agg).reset_index()
    return out.drop(columns=["_all"], errors="ignore")
