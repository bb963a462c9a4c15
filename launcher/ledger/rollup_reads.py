"""Reads of the cost rollup (launcher/ledger/rollup.py) for reports: the sums over runs that lie
wholly inside a report's window, grouped in the database, and which runs a report must read
attempt by attempt instead (running, not rolled up, or crossing the window's edges)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import and_, case, exists, func, literal, not_, select, union

from launcher.ledger import models as m
from launcher.ledger.readers import _Select
from launcher.ledger.rollup import GRAIN_RUN, GRAIN_SPLIT
from launcher.cost.storage import HOURS_PER_MONTH, are_list_prices

GROUP_COLUMNS = ("project", "experiment", "owner", "cost_center", "cloud", "region", "run_id")
# measure name in a report -> SUM expression over cost_rollup
_MEASURES = {
    "x_ComputeCost": "compute_usd",
    "ListComputeCost": "list_compute_usd",
    "x_NodeHours": "node_hours",
    "x_GpuHours": "gpu_hours",
    "x_Preemptions": "preemptions",
    "x_Attempts": "attempts_started",
    "x_RestartOverheadCost": "restart_overhead_usd",
    "x_PreemptionLossCost": "preemption_loss_usd",
    "x_IdleCost": "idle_usd",
}


def _inside(since: float, horizon: float) -> Any:
    """Rolled-up runs whose every row lies in [since, horizon): their rows are the report's."""
    c = m.cost_rollup_runs.c
    return and_(c.first_s >= since, c.last_s < horizon)


def read_rollup_groups(
    conn: Any,
    keys: Sequence[str],
    by_month: bool,
    since: float,
    horizon: float,
    storage_usd_per_gb_month: Mapping[str, float],
    default_storage_usd_per_gb_month: float,
) -> pd.DataFrame:
    """Per group of `keys` (GROUP_COLUMNS) and month (`by_month`, else none): the report's
    measures summed over the runs inside [since, horizon), the period bounds, the largest bill
    end and the distinct runs with compute (columns as report.build's grouped rows, the bucket
    as its start in epoch seconds under `_bucket_start`)."""
    c = m.cost_rollup.c
    q = _Select(conn, True)
    for k in keys:
        q.text(k, c[k])
    group = [c[k] for k in keys]
    if by_month:
        q.num("_bucket_start", c.month_start_s)
        group.append(c.month_start_s)
    for name, col in _MEASURES.items():
        q.num(name, func.sum(c[col]))
    list_prices = are_list_prices(storage_usd_per_gb_month, default_storage_usd_per_gb_month)
    by_run_keys = list_prices and not by_month and not {"cloud", "region"} & set(keys)
    if list_prices:
        q.num("x_CheckpointStorageCost", func.sum(c.storage_usd))
    else:  # other prices per cloud (the run rows have no cloud: the split ones are summed)
        prices = dict(storage_usd_per_gb_month)
        other = literal(default_storage_usd_per_gb_month)
        price = case(prices, value=c.cloud, else_=other) if prices else other
        q.num("x_CheckpointStorageCost", func.sum(c.storage_gb_hours * price) / HOURS_PER_MONTH)
    q.num("seg_start", func.min(c.seg_start_s))
    q.num("seg_end", func.max(c.seg_end_s))
    q.num("compute_end", func.max(c.compute_end_s))
    bit = (1 if "cloud" in keys else 0) | (2 if "region" in keys else 0) | (4 if by_month else 0)  # see rollup.py
    q.num("x_Runs", func.sum(case((c.run_count_bits.op("&")(1 << bit) != 0, 1), else_=0)))
    # the run's extent is on every row (no join): the filter is one pass over the rollup
    grain = GRAIN_RUN if by_run_keys else GRAIN_SPLIT
    stmt = q.statement().where(c.grain == grain, c.run_first_s >= since, c.run_last_s < horizon).group_by(*group)
    return q.frame(conn, stmt)


def detail_runs(since: float, until: float | None, horizon: float) -> Any:
    """SELECT of the run ids a report over [since, until) reads attempt by attempt: runs not
    rolled up (running, or an attempt still open), and rolled-up runs that reach into the
    window without lying wholly inside [since, horizon)."""
    c, r = m.cost_rollup_runs.c, m.runs.c
    crossing = [c.last_s >= since, not_(_inside(since, horizon))]
    if until is not None:
        crossing.append(c.first_s < until)
    return union(
        select(c.run_id).where(*crossing),
        # NOT EXISTS, not NOT IN: PostgreSQL turns a NOT IN over more ids than work_mem holds
        # into a scan of the subquery per row
        select(r.run_id).where(~exists().where(c.run_id == r.run_id)),
    )


def first_start(conn: Any, until: Any | None) -> float | None:
    """The earliest attempt start (before `until`), epoch seconds."""
    a = m.attempts.c
    stmt = select(func.min(a.started_at))
    if until is not None:
        stmt = stmt.where(a.started_at < until)
    t = conn.execute(stmt).scalar()
    return None if t is None else t.timestamp()
