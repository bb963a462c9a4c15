"""The rules of what an attempt cost, on numpy arrays (no pandas): the one implementation behind
reports, budgets, `runs`/`status` spend (launcher.ledger.attempt_cost adapts DataFrames to it)
and the cost rollup the controller writes as a run ends (launcher.ledger.rollup). The rules
themselves are described in launcher/ledger/attempt_cost.py.

An attempt's per-node price history is `PriceChanges`: attempt row -> (times, per-node prices),
in time order; only changes strictly inside the billed interval count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

PriceChanges = Mapping[int, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class AttemptColumns:
    """One entry per attempt, epoch seconds, NaN where unknown (ended_at: still open)."""

    started_at: np.ndarray
    ended_at: np.ndarray
    billed_seconds: np.ndarray
    teardown_at: np.ndarray
    num_nodes: np.ndarray
    price_usd_per_hour: np.ndarray
    on_demand_price_usd_per_hour: np.ndarray
    seq: np.ndarray
    overhead_s: np.ndarray  # the recovery event's restart_overhead_seconds
    resume_at: np.ndarray  # the first recovery event
    last_ckpt_at: np.ndarray
    preempted: np.ndarray  # bool: ended preempted / node lost


@dataclass(frozen=True)
class Intervals:
    """Per attempt: billed interval, average all-node rates and the waste intervals."""

    start: np.ndarray
    job_end: np.ndarray
    bill_end: np.ndarray
    billed_s: np.ndarray
    rate_usd_per_hour: np.ndarray
    list_rate_usd_per_hour: np.ndarray
    overhead_end: np.ndarray
    loss_start: np.ndarray
    preempted: np.ndarray


def billed_intervals(a: AttemptColumns, rate_changes: PriceChanges, as_of: float) -> Intervals:
    """The billed interval [start, bill_end), the average rate over it and the waste intervals.
    `rate_changes`: the price history of the attempts whose average rate it changes."""
    start, ended = a.started_at, a.ended_at
    job_end = np.where(np.isnan(ended), np.maximum(as_of, start), ended)
    bill_end = np.where(np.isnan(a.billed_seconds), job_end, start + np.maximum(a.billed_seconds, 0.0))
    bill_end = np.fmax(bill_end, np.where(a.teardown_at > start, a.teardown_at, np.nan))

    nodes, price = a.num_nodes, a.price_usd_per_hour
    rate = price * nodes
    if rate_changes:
        rate = rate.copy()
        for i, (at, prices) in rate_changes.items():
            s, e = start[i], bill_end[i]
            if e <= s:
                continue
            inside = (at > s) & (at < e)
            t = np.concatenate([[s], at[inside], [e]])
            p = np.concatenate([[price[i]], prices[inside]])
            rate[i] = float(((t[1:] - t[:-1]) * p).sum()) / (e - s) * nodes[i]
    list_rate = np.where(np.isnan(a.on_demand_price_usd_per_hour), rate, a.on_demand_price_usd_per_hour * nodes)

    # restart overhead: only recoveries (seq > 1); explicit seconds win over event times
    overhead_end = np.where(np.isnan(a.overhead_s), a.resume_at, start + np.nan_to_num(a.overhead_s, nan=0.0))
    overhead_end = np.where((a.seq > 1) & ~np.isnan(overhead_end), overhead_end, start)
    overhead_end = np.clip(overhead_end, start, job_end)

    preempted = a.preempted.astype(bool) & ~np.isnan(ended)
    useful_from = np.fmax(overhead_end, np.where(a.last_ckpt_at <= job_end, a.last_ckpt_at, np.nan))
    loss_start = np.where(preempted, np.minimum(useful_from, job_end), job_end)
    return Intervals(start, job_end, bill_end, bill_end - start, rate, list_rate, overhead_end, loss_start, preempted)


def overlap(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Length of [a0, a1) ∩ [b0, b1), element-wise, never negative."""
    return np.clip(np.minimum(a1, b1) - np.maximum(a0, b0), 0.0, None)


def explode(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows x buckets: for intervals [start, end) and bucket edges e0 < e1 < ... < en, the
    (row index, bucket index) pairs of every bucket each interval overlaps, rows ascending. An
    interval of zero length lands in the bucket holding its start; intervals outside are dropped."""
    nb = len(edges) - 1
    s = np.maximum(start, edges[0])
    e = np.minimum(end, edges[-1])
    point = (start == end) & (start >= edges[0]) & (start < edges[-1])
    keep = (e > s) | point
    rows = np.flatnonzero(keep)
    first = np.clip(np.searchsorted(edges, s[rows], side="right") - 1, 0, nb - 1)
    last = np.where(point[rows], first, np.searchsorted(edges, e[rows], side="left") - 1)
    last = np.clip(np.maximum(last, first), 0, nb - 1)
    counts = last - first + 1
    rep = np.repeat(np.arange(len(rows)), counts)
    offsets = np.arange(len(rep)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows[rep], first[rep] + offsets


def bucket_first(rows: np.ndarray, bucket: np.ndarray) -> np.ndarray:
    """For each exploded row, the first bucket of its source row (rows are grouped, ascending)."""
    if len(rows) == 0:
        return bucket
    new = np.r_[True, rows[1:] != rows[:-1]]
    idx = np.maximum.accumulate(np.where(new, np.arange(len(rows)), 0))
    return bucket[idx]


def segments(
    iv: Intervals,
    nodes: np.ndarray,
    price: np.ndarray,
    edges: np.ndarray,
    gpu_count: np.ndarray,
    cost_changes: PriceChanges | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Money and hours of each attempt inside each bucket. Returns (row, bucket, measures).
    With `cost_changes` (price history), an attempt's billed cost in a bucket is the price in
    force during that part of the attempt (its waste stays at the average rate)."""
    start, bill_end = iv.start, iv.bill_end
    rows, bucket = explode(start, bill_end, edges)
    b0, b1 = edges[bucket], edges[bucket + 1]
    s, e = start[rows], bill_end[rows]
    job_end = iv.job_end[rows]
    hours = overlap(s, e, b0, b1) / 3600.0
    rate = iv.rate_usd_per_hour[rows]
    list_rate = iv.list_rate_usd_per_hour[rows]
    overhead_h = overlap(s, iv.overhead_end[rows], b0, b1) / 3600.0
    loss_h = overlap(iv.loss_start[rows], np.minimum(job_end, e), b0, b1) / 3600.0
    idle_h = overlap(np.minimum(job_end, e), e, b0, b1) / 3600.0
    n = nodes[rows]
    # a preemption lands in the bucket holding the job's last billed moment: its end, or the bill
    # end approached from the left when the job ran to it (an end on a midnight belongs to the day
    # before, whatever the bucket size, so day rollups sum to the same months)
    t_end = np.minimum(np.maximum(job_end, s), e)
    from_left = (t_end == e) & (e > s)
    in_bucket = np.where(from_left, (b0 < t_end) & (t_end <= b1), (b0 <= t_end) & (t_end < b1))
    preempted = iv.preempted[rows] & in_bucket
    first_bucket = bucket == bucket_first(rows, bucket)  # count each attempt once
    seg_s, seg_e = np.maximum(s, b0), np.minimum(e, b1)
    cost = hours * rate
    if cost_changes:
        cost = _piecewise_cost(cost, rows, seg_s, seg_e, iv, price, nodes, cost_changes)
    measures = {
        "x_ComputeCost": cost,
        "ListComputeCost": hours * list_rate,
        "x_NodeHours": hours * n,
        "x_GpuHours": hours * n * gpu_count[rows],
        "x_Preemptions": preempted.astype("int64"),
        "x_Attempts": first_bucket.astype("int64"),
        "x_RestartOverheadCost": overhead_h * rate,
        "x_PreemptionLossCost": loss_h * rate,
        "x_IdleCost": idle_h * rate,
        "seg_start": seg_s,
        "seg_end": seg_e,
    }
    return rows, bucket, measures


def _piecewise_cost(
    cost: np.ndarray, rows: np.ndarray, seg_s: np.ndarray, seg_e: np.ndarray, iv: Intervals, price: np.ndarray,
    nodes: np.ndarray, changes: PriceChanges,
) -> np.ndarray:
    """Segment costs of the (few) attempts with price changes, price piece by price piece."""
    cost = cost.copy()
    for i, (at, prices) in changes.items():
        lo, hi = np.searchsorted(rows, i, "left"), np.searchsorted(rows, i, "right")
        if lo == hi:
            continue
        inside = (at > iv.start[i]) & (at < iv.bill_end[i])
        t = np.concatenate([[iv.start[i]], at[inside], [iv.bill_end[i]]])
        p = np.concatenate([[price[i]], prices[inside]])
        piece_h = overlap(t[None, :-1], t[None, 1:], seg_s[lo:hi, None], seg_e[lo:hi, None]) / 3600.0
        cost[lo:hi] = (piece_h * p[None, :]).sum(axis=1) * nodes[i]
    return cost
