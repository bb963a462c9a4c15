"""How an attempt's cost is counted (pure pandas/numpy; no I/O).

An attempt bills `num_nodes` machines at `price_usd_per_hour` each (per node) over its billed
interval [started_at, bill_end):

- bill_end is started_at + billed_seconds (the ledger's figure; ended_at - started_at by
  default, up to the report's clock while the attempt is open), extended to the attempt's
  `teardown` event when that comes later (the machines bill until they are gone).
- Spot price history: `price` events on an attempt (data `price_usd_per_hour`) change the
  per-node price from their time on; the cost is the piecewise integral.
- List cost uses `on_demand_price_usd_per_hour` (the attempt's own price when unknown), so
  spot savings = list cost - billed cost for compute.

Waste is time billed without useful progress, each part an interval inside the billed one:
- restart overhead (attempts after the first, i.e. recoveries): from started_at until the job
  was running again, which the controller records as a `recovery` event on the new attempt
  (its time, or its data's `restart_overhead_seconds` when given); none without that event.
- preemption loss (end_reason preempted / node_lost): work since the attempt's last checkpoint
  (or since the restart overhead ended when it never checkpointed) up to the attempt's end.
- idle before teardown: from the job's end (ended_at) to bill_end.
Waste is priced at the attempt's average hourly rate.

Checkpoint storage (an estimate): each `checkpoint` event's size (data `size_bytes`) is stored
from its time until the run's `keep_last`-th next checkpoint (older ones are assumed deleted);
the newest ones are kept until 7 days after the run ended (never past the report's end or its
clock), at `storage_usd_per_gb_month` for the attempt's cloud (GB = 1e9 bytes, a month = 730
hours). Checkpoints without a size cost nothing.

Every amount is split across the report's window and its day/month buckets by the overlap of
each interval with the bucket, so an attempt that crosses midnight is shared between two days.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from launcher.cost.window import Window
from launcher.cost.storage import DEFAULT_STORAGE_USD_PER_GB_MONTH, OTHER_STORAGE_USD_PER_GB_MONTH


@dataclass(frozen=True)
class CostAssumptions:
    storage_usd_per_gb_month: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_STORAGE_USD_PER_GB_MONTH)
    )
    default_storage_usd_per_gb_month: float = OTHER_STORAGE_USD_PER_GB_MONTH
    checkpoint_keep_last: int = 3
    checkpoint_retention_after_run_s: float = 7 * 86400.0

    def storage_price(self, clouds: pd.Series) -> np.ndarray:
        return (
            clouds.map(dict(self.storage_usd_per_gb_month))
            .astype("float64")
            .fillna(self.default_storage_usd_per_gb_month)
            .to_numpy()
        )


@dataclass(frozen=True)
class EventFacts:
    """Event rows a report needs beyond the per-attempt columns (see load.py).

    checkpoints: one row per sized checkpoint: at, retain_until (the run's keep_last-th next
      checkpoint, NaN when none), size_bytes, run_ended_at, cloud, and the grouping key columns.
    prices: one row per price change: attempt_id, at, price_usd_per_hour.
    """

    checkpoints: pd.DataFrame
    prices: pd.DataFrame

    @classmethod
    def empty(cls) -> EventFacts:
        return cls(
            checkpoints=pd.DataFrame(
                {c: pd.Series(dtype="float64") for c in ("at", "retain_until", "size_bytes", "run_ended_at")}
            ),
            prices=pd.DataFrame(
                {"attempt_id": pd.Series(dtype="object"), "at": pd.Series(dtype="float64"),
                 "price_usd_per_hour": pd.Series(dtype="float64")}
            ),
        )  # fmt: skip


def _col(attempts: pd.DataFrame, name: str) -> np.ndarray:
    if name in attempts:
        return attempts[name].to_numpy(dtype="float64")
    return np.full(len(attempts), np.nan)


def attempt_intervals(attempts: pd.DataFrame, facts: EventFacts, as_of: float) -> pd.DataFrame:
    """Per attempt: billed interval, average rates and the waste intervals (all epoch seconds).

    `attempts` has the ledger's attempt columns with started_at/ended_at as float epoch seconds,
    `preempted` (bool) and the event facts per attempt (NaN where unknown): teardown_at,
    resume_at (first `recovery` event), overhead_s (its restart_overhead_seconds) and
    last_ckpt_at.
    Returns a frame aligned with `attempts` holding: start, job_end, bill_end, billed_s,
    rate_usd_per_hour (all nodes, average over the billed interval), list_rate_usd_per_hour,
    overhead_end, loss_start, preempted.
    """
    start = attempts["started_at"].to_numpy(dtype="float64")
    ended = attempts["ended_at"].to_numpy(dtype="float64")
    job_end = np.where(np.isnan(ended), np.maximum(as_of, start), ended)
    billed = attempts["billed_seconds"].to_numpy(dtype="float64")
    bill_end = np.where(np.isnan(billed), job_end, start + np.maximum(billed, 0.0))
    teardown = _col(attempts, "teardown_at")
    bill_end = np.fmax(bill_end, np.where(teardown > start, teardown, np.nan))
    billed_s = bill_end - start

    nodes = attempts["num_nodes"].to_numpy(dtype="float64")
    price = attempts["price_usd_per_hour"].to_numpy(dtype="float64")
    od = attempts["on_demand_price_usd_per_hour"].to_numpy(dtype="float64")
    rate = price * nodes
    if len(facts.prices):
        rate = _apply_price_history(attempts, facts.prices, start, bill_end, price, nodes, rate)
    list_rate = np.where(np.isnan(od), rate, od * nodes)

    # restart overhead: only recoveries (seq > 1); explicit seconds win over event times
    seq = attempts["seq"].to_numpy()
    explicit = _col(attempts, "overhead_s")
    resume = _col(attempts, "resume_at")
    overhead_end = np.where(np.isnan(explicit), resume, start + np.nan_to_num(explicit, nan=0.0))
    overhead_end = np.where((seq > 1) & ~np.isnan(overhead_end), overhead_end, start)
    overhead_end = np.clip(overhead_end, start, job_end)

    preempted = attempts["preempted"].to_numpy(dtype=bool) & ~np.isnan(ended)
    last_ckpt = _col(attempts, "last_ckpt_at")
    useful_from = np.fmax(overhead_end, np.where(last_ckpt <= job_end, last_ckpt, np.nan))
    loss_start = np.where(preempted, np.minimum(useful_from, job_end), job_end)

    return pd.DataFrame(
        {
            "start": start,
            "job_end": job_end,
            "bill_end": bill_end,
            "billed_s": billed_s,
            "rate_usd_per_hour": rate,
            "list_rate_usd_per_hour": list_rate,
            "overhead_end": overhead_end,
            "loss_start": loss_start,
            "preempted": preempted,
        },
        index=attempts.index,
    )


def _apply_price_history(
    attempts: pd.DataFrame,
    prices: pd.DataFrame,
    start: np.ndarray,
    bill_end: np.ndarray,
    price: np.ndarray,
    nodes: np.ndarray,
    rate: np.ndarray,
) -> np.ndarray:
    """Average all-node rate over the billed interval for attempts with price events (few)."""
    rate = rate.copy()
    pos = pd.Series(np.arange(len(attempts)), index=attempts["attempt_id"].to_numpy())
    for attempt_id, changes in prices.sort_values("at").groupby("attempt_id", sort=False):
        i = pos.get(attempt_id)
        if i is None or isinstance(i, pd.Series):
            continue
        s, e = start[i], bill_end[i]
        if e <= s:
            continue
        times = [s] + [t for t in changes["at"].tolist() if s < t < e] + [e]
        values = [price[i]] + [p for t, p in zip(changes["at"].tolist(), changes["price_usd_per_hour"].tolist()) if s < t < e]
        cost = sum((t1 - t0) * p for t0, t1, p in zip(times[:-1], times[1:], values))
        rate[i] = cost / (e - s) * nodes[i]
    return rate


def _piecewise_cost(
    cost: np.ndarray, rows: np.ndarray, seg_s: np.ndarray, seg_e: np.ndarray, attempts: pd.DataFrame,
    prices: pd.DataFrame, iv: pd.DataFrame,
) -> np.ndarray:
    """Segment costs of the (few) attempts with price changes, price piece by price piece."""
    cost = cost.copy()
    known = attempts["attempt_id"].notna().to_numpy()  # ids are loaded only where prices changed
    pos = pd.Series(np.flatnonzero(known), index=attempts["attempt_id"].to_numpy()[known])
    pos = pos[~pos.index.duplicated()]
    start, bill_end = iv["start"].to_numpy(), iv["bill_end"].to_numpy()
    price = attempts["price_usd_per_hour"].to_numpy(dtype="float64")
    nodes = attempts["num_nodes"].to_numpy(dtype="float64")
    for attempt_id, changes in prices.sort_values("at").groupby("attempt_id", sort=False):
        i = pos.get(attempt_id)
        if i is None:
            continue
        lo, hi = np.searchsorted(rows, i, "left"), np.searchsorted(rows, i, "right")
        if lo == hi:
            continue
        at = changes["at"].to_numpy(dtype="float64")
        inside = (at > start[i]) & (at < bill_end[i])
        t = np.concatenate([[start[i]], at[inside], [bill_end[i]]])
        p = np.concatenate([[price[i]], changes["price_usd_per_hour"].to_numpy(dtype="float64")[inside]])
        piece_h = overlap(t[None, :-1], t[None, 1:], seg_s[lo:hi, None], seg_e[lo:hi, None]) / 3600.0
        cost[lo:hi] = (piece_h * p[None, :]).sum(axis=1) * nodes[i]
    return cost


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


def compute_segments(
    intervals: pd.DataFrame,
    attempts: pd.DataFrame,
    edges: np.ndarray,
    gpu_count: np.ndarray,
    prices: pd.DataFrame | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Money and hours of each attempt inside each bucket. Returns (row, bucket, measures).
    With `prices` (price history), an attempt's billed cost in a bucket is the price in force
    during that part of the attempt (its waste stays at the average rate)."""
    iv = intervals
    start, bill_end = iv["start"].to_numpy(), iv["bill_end"].to_numpy()
    rows, bucket = explode(start, bill_end, edges)
    b0, b1 = edges[bucket], edges[bucket + 1]
    s, e = start[rows], bill_end[rows]
    job_end = iv["job_end"].to_numpy()[rows]
    hours = overlap(s, e, b0, b1) / 3600.0
    rate = iv["rate_usd_per_hour"].to_numpy()[rows]
    list_rate = iv["list_rate_usd_per_hour"].to_numpy()[rows]
    overhead_h = overlap(s, iv["overhead_end"].to_numpy()[rows], b0, b1) / 3600.0
    loss_h = overlap(iv["loss_start"].to_numpy()[rows], np.minimum(job_end, e), b0, b1) / 3600.0
    idle_h = overlap(np.minimum(job_end, e), e, b0, b1) / 3600.0
    nodes = attempts["num_nodes"].to_numpy(dtype="float64")[rows]
    # a preemption lands in the bucket holding the job's last billed moment: its end, or the bill
    # end approached from the left when the job ran to it (an end on a midnight belongs to the day
    # before, whatever the bucket size, so day rollups sum to the same months)
    t_end = np.minimum(np.maximum(job_end, s), e)
    from_left = (t_end == e) & (e > s)
    in_bucket = np.where(from_left, (b0 < t_end) & (t_end <= b1), (b0 <= t_end) & (t_end < b1))
    preempted = iv["preempted"].to_numpy()[rows] & in_bucket
    first_bucket = bucket == bucket_first(rows, bucket)  # count each attempt once
    cost = hours * rate
    if prices is not None and len(prices):
        cost = _piecewise_cost(cost, rows, np.maximum(s, b0), np.minimum(e, b1), attempts, prices, iv)
    list_cost = hours * list_rate
    measures = {
        "x_ComputeCost": cost,
        "ListComputeCost": list_cost,
        "x_NodeHours": hours * nodes,
        "x_GpuHours": hours * nodes * gpu_count[rows],
        "x_Preemptions": preempted.astype("int64"),
        "x_Attempts": first_bucket.astype("int64"),
        "x_RestartOverheadCost": overhead_h * rate,
        "x_PreemptionLossCost": loss_h * rate,
        "x_IdleCost": idle_h * rate,
        "seg_start": np.maximum(s, b0),
        "seg_end": np.minimum(e, b1),
    }
    return rows, bucket, measures


def bucket_first(rows: np.ndarray, bucket: np.ndarray) -> np.ndarray:
    """For each exploded row, the first bucket of its source row (rows are grouped, ascending)."""
    if len(rows) == 0:
        return bucket
    new = np.r_[True, rows[1:] != rows[:-1]]
    idx = np.maximum.accumulate(np.where(new, np.arange(len(rows)), 0))
    return bucket[idx]


def compute_cost_in_window(attempts: pd.DataFrame, prices: pd.DataFrame | None, as_of: float, window: Window) -> float:
    """Compute cost (USD) of `attempts` (the bulk reader's frame) inside the window; open
    bounds as a report closes them (the first start; the clock or the last bill end)."""
    if len(attempts) == 0:
        return 0.0
    facts = EventFacts.empty() if prices is None else EventFacts(checkpoints=EventFacts.empty().checkpoints, prices=prices)
    iv = attempt_intervals(attempts.reset_index(drop=True), facts, as_of)
    lo, hi = window.bounds_s(first_s=float(iv["start"].min()), last_s=max(as_of, float(iv["bill_end"].max())))
    edges = np.array([lo, hi], dtype="float64")
    _, _, m = compute_segments(iv, attempts.reset_index(drop=True), edges, np.zeros(len(attempts)), facts.prices)
    return float(m["x_ComputeCost"].sum())


def attempt_costs(attempts: pd.DataFrame, prices: pd.DataFrame | None, as_of: float) -> dict[str, float]:
    """attempt_id -> whole compute cost so far (the same rules, no window)."""
    if len(attempts) == 0:
        return {}
    attempts = attempts.reset_index(drop=True)
    facts = EventFacts.empty() if prices is None else EventFacts(checkpoints=EventFacts.empty().checkpoints, prices=prices)
    iv = attempt_intervals(attempts, facts, as_of)
    lo = float(iv["start"].min())
    edges = np.array([lo, max(as_of, float(iv["bill_end"].max()), lo)], dtype="float64")
    rows, _, m = compute_segments(iv, attempts, edges, np.zeros(len(attempts)), facts.prices)
    cost = np.bincount(rows, weights=m["x_ComputeCost"], minlength=len(attempts))
    return dict(zip(attempts["attempt_id"].tolist(), cost.tolist()))
