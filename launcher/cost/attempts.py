"""The rules of what an attempt cost, written once against a small array namespace `xp`
(isnan, logical_not, where, maximum, minimum, fmax, clip, as in the Python array API): numpy for
the vectorized paths behind reports, budgets and `runs`/`status` spend (launcher.ledger.attempt_cost
adapts DataFrames to them), launcher.cost.scalar_xp for one attempt at a time in the cost rollup
the controller writes as a run ends (launcher.ledger.rollup), which must not import numpy. numpy
is imported only inside the vectorized functions. The rules themselves are described in
launcher/ledger/attempt_cost.py.

An attempt's per-node price history is `PriceChanges`: attempt row -> (times, per-node prices),
in time order; only changes strictly inside the billed interval count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from launcher.cost import scalar_xp

if TYPE_CHECKING:
    import numpy as np

PriceChanges = Mapping[int, "tuple[np.ndarray, np.ndarray]"]
NAN = float("nan")
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


# ---- the rules (each once; `xp` is numpy or scalar_xp) --------------------------------------


def _overlap(xp: Any, a0: Any, a1: Any, b0: Any, b1: Any) -> Any:
    """Length of [a0, a1) ∩ [b0, b1), element-wise, never negative."""
    return xp.maximum(xp.minimum(a1, b1) - xp.maximum(a0, b0), 0.0)


def _interval_rules(
    xp: Any, start: Any, ended: Any, billed_seconds: Any, teardown_at: Any, seq: Any, overhead_s: Any,
    resume_at: Any, last_ckpt_at: Any, preempted: Any, as_of: float,
) -> tuple[Any, Any, Any, Any, Any]:
    """(job_end, bill_end, overhead_end, loss_start, preempted): the billed interval and the
    waste intervals, NaN where a time is unknown (ended: still open)."""
    job_end = xp.where(xp.isnan(ended), xp.maximum(as_of, start), ended)
    bill_end = xp.where(xp.isnan(billed_seconds), job_end, start + xp.maximum(billed_seconds, 0.0))
    bill_end = xp.fmax(bill_end, xp.where(teardown_at > start, teardown_at, NAN))
    # restart overhead: only recoveries (seq > 1); explicit seconds win over event times
    overhead_end = xp.where(xp.isnan(overhead_s), resume_at, start + overhead_s)
    overhead_end = xp.where((seq > 1) & xp.logical_not(xp.isnan(overhead_end)), overhead_end, start)
    overhead_end = xp.clip(overhead_end, start, job_end)
    preempted = preempted & xp.logical_not(xp.isnan(ended))
    useful_from = xp.fmax(overhead_end, xp.where(last_ckpt_at <= job_end, last_ckpt_at, NAN))
    loss_start = xp.where(preempted, xp.minimum(useful_from, job_end), job_end)
    return job_end, bill_end, overhead_end, loss_start, preempted


def _list_rate(xp: Any, rate: Any, on_demand_price_usd_per_hour: Any, nodes: Any) -> Any:
    """List (on-demand) rate of all nodes; the attempt's own rate when unknown."""
    return xp.where(xp.isnan(on_demand_price_usd_per_hour), rate, on_demand_price_usd_per_hour * nodes)


def price_pieces(
    start: float, bill_end: float, price_usd_per_hour: float, changes: Iterable[tuple[float, float]]
) -> list[tuple[float, float, float]]:
    """(from, to, per-node price) of one attempt: its own price from its start, each change
    strictly inside [start, bill_end) from its time on."""
    times, values = [start], [price_usd_per_hour]
    for t, p in changes:
        if start < t < bill_end:
            times.append(t)
            values.append(p)
    times.append(bill_end)
    return list(zip(times[:-1], times[1:], values))


def _average_rate(pieces: list[tuple[float, float, float]], start: float, bill_end: float, nodes: float) -> float:
    """All-node rate averaged over the billed interval under a price history."""
    return sum((t1 - t0) * p for t0, t1, p in pieces) / (bill_end - start) * nodes


def _piece_usd(xp: Any, t0: Any, t1: Any, price: Any, seg_start: Any, seg_end: Any) -> Any:
    """What a price piece bills per node inside a segment (summed over pieces, times nodes)."""
    return _overlap(xp, t0, t1, seg_start, seg_end) / 3600.0 * price


class BucketMeasures(NamedTuple):
    hours: Any
    compute_usd: Any  # at the average rate; an attempt with a price history is priced piece by piece
    list_compute_usd: Any
    node_hours: Any
    gpu_hours: Any
    restart_overhead_usd: Any  # waste, at the average rate
    preemption_loss_usd: Any
    idle_usd: Any
    preempted: Any  # the preemption counts in this bucket


def _bucket_rules(
    xp: Any, s: Any, e: Any, job_end: Any, overhead_end: Any, loss_start: Any, preempted: Any, rate: Any,
    list_rate: Any, nodes: Any, gpus: Any, b0: Any, b1: Any,
) -> BucketMeasures:
    """An attempt billed over [s, e) inside the bucket [b0, b1): its money, hours, and whether
    its preemption lands there."""
    idle_from = xp.minimum(job_end, e)
    # a preemption lands in the bucket holding the job's last billed moment: its end, or the bill
    # end approached from the left when the job ran to it (an end on a midnight belongs to the day
    # before, whatever the bucket size, so day rollups sum to the same months)
    t_end = xp.minimum(xp.maximum(job_end, s), e)
    from_left = (t_end == e) & (e > s)
    in_bucket = xp.where(from_left, (b0 < t_end) & (t_end <= b1), (b0 <= t_end) & (t_end < b1))
    hours = _overlap(xp, s, e, b0, b1) / 3600.0
    return BucketMeasures(
        hours,
        hours * rate,  # compute
        hours * list_rate,  # list compute
        hours * nodes,  # node hours
        hours * nodes * gpus,  # GPU hours
        _overlap(xp, s, overhead_end, b0, b1) / 3600.0 * rate,  # restart overhead
        _overlap(xp, loss_start, idle_from, b0, b1) / 3600.0 * rate,  # preemption loss
        _overlap(xp, idle_from, e, b0, b1) / 3600.0 * rate,  # idle
        preempted & in_bucket,
    )


# ---- one attempt at a time, no numpy (the cost rollup) ----------------------------------------


class AttemptFacts(Protocol):
    """One attempt as the rollup reads it: epoch seconds, None where unknown."""

    started_at: float
    ended_at: float | None
    billed_seconds: float | None
    teardown_at: float | None
    num_nodes: float
    price_usd_per_hour: float
    on_demand_price_usd_per_hour: float | None
    seq: int
    overhead_s: float | None
    resume_at: float | None
    last_ckpt_at: float | None
    preempted: bool
    prices: tuple[tuple[float, float], ...]  # (at, per-node price) in time order


class OneAttempt(NamedTuple):
    """One attempt's billed and waste intervals (epoch seconds), all-node rates and price pieces."""

    start: float
    job_end: float
    bill_end: float
    rate_usd_per_hour: float
    list_rate_usd_per_hour: float
    overhead_end: float
    loss_start: float
    preempted: bool
    nodes: float
    pieces: list[tuple[float, float, float]]  # empty without a price history


def _nan(v: float | None) -> float:
    return NAN if v is None else v


def one_attempt(a: AttemptFacts, as_of: float = NAN) -> OneAttempt:
    """billed_intervals for one attempt, in plain Python."""
    xp = scalar_xp
    start, nodes, price = a.started_at, a.num_nodes, a.price_usd_per_hour
    job_end, bill_end, overhead_end, loss_start, pre = _interval_rules(
        xp, start, _nan(a.ended_at), _nan(a.billed_seconds), _nan(a.teardown_at), a.seq, _nan(a.overhead_s),
        _nan(a.resume_at), _nan(a.last_ckpt_at), bool(a.preempted), as_of,
    )  # fmt: skip
    rate = price * nodes
    pieces = price_pieces(start, bill_end, price, a.prices) if a.prices and bill_end > start else []
    if pieces:
        rate = _average_rate(pieces, start, bill_end, nodes)
    list_rate = _list_rate(xp, rate, _nan(a.on_demand_price_usd_per_hour), nodes)
    return OneAttempt(start, job_end, bill_end, rate, list_rate, overhead_end, loss_start, pre, nodes, pieces)


def one_bucket(a: OneAttempt, b0: float, b1: float, gpus: float) -> tuple[float, BucketMeasures]:
    """(compute cost, measures) of one attempt inside [b0, b1), as `segments` counts them."""
    xp = scalar_xp
    m = _bucket_rules(
        xp, a.start, a.bill_end, a.job_end, a.overhead_end, a.loss_start, a.preempted, a.rate_usd_per_hour,
        a.list_rate_usd_per_hour, a.nodes, gpus, b0, b1,
    )  # fmt: skip
    if a.pieces:
        s0, s1 = max(a.start, b0), min(a.bill_end, b1)
        return sum(_piece_usd(xp, t0, t1, p, s0, s1) for t0, t1, p in a.pieces) * a.nodes, m
    return m.compute_usd, m


# ---- vectorized (numpy, imported here only) ---------------------------------------------------


def billed_intervals(a: AttemptColumns, rate_changes: PriceChanges, as_of: float) -> Intervals:
    """The billed interval [start, bill_end), the average rate over it and the waste intervals.
    `rate_changes`: the price history of the attempts whose average rate it changes."""
    import numpy as np

    start = a.started_at
    job_end, bill_end, overhead_end, loss_start, preempted = _interval_rules(
        np, start, a.ended_at, a.billed_seconds, a.teardown_at, a.seq, a.overhead_s, a.resume_at, a.last_ckpt_at,
        a.preempted.astype(bool), as_of,
    )  # fmt: skip
    nodes, price = a.num_nodes, a.price_usd_per_hour
    rate = price * nodes
    if rate_changes:
        rate = rate.copy()
        for i, (at, prices) in rate_changes.items():
            s, e = float(start[i]), float(bill_end[i])
            if e <= s:
                continue
            pieces = price_pieces(s, e, float(price[i]), zip(at.tolist(), prices.tolist()))
            rate[i] = _average_rate(pieces, s, e, float(nodes[i]))
    list_rate = _list_rate(np, rate, a.on_demand_price_usd_per_hour, nodes)
    return Intervals(start, job_end, bill_end, bill_end - start, rate, list_rate, overhead_end, loss_start, preempted)


def overlap(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Length of [a0, a1) ∩ [b0, b1), element-wise, never negative."""
    import numpy as np

    return _overlap(np, a0, a1, b0, b1)


def explode(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows x buckets: for intervals [start, end) and bucket edges e0 < e1 < ... < en, the
    (row index, bucket index) pairs of every bucket each interval overlaps, rows ascending. An
    interval of zero length lands in the bucket holding its start; intervals outside are dropped."""
    import numpy as np

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
    import numpy as np

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
    import numpy as np

    start, bill_end = iv.start, iv.bill_end
    rows, bucket = explode(start, bill_end, edges)
    b0, b1 = edges[bucket], edges[bucket + 1]
    s, e = start[rows], bill_end[rows]
    m = _bucket_rules(
        np, s, e, iv.job_end[rows], iv.overhead_end[rows], iv.loss_start[rows], iv.preempted[rows],
        iv.rate_usd_per_hour[rows], iv.list_rate_usd_per_hour[rows], nodes[rows], gpu_count[rows], b0, b1,
    )  # fmt: skip
    first_bucket = bucket == bucket_first(rows, bucket)  # count each attempt once
    seg_s, seg_e = np.maximum(s, b0), np.minimum(e, b1)
    cost = m.compute_usd
    if cost_changes:
        cost = _piecewise_cost(cost, rows, seg_s, seg_e, iv, price, nodes, cost_changes)
    measures = {
        "x_ComputeCost": cost,
        "ListComputeCost": m.list_compute_usd,
        "x_NodeHours": m.node_hours,
        "x_GpuHours": m.gpu_hours,
        "x_Preemptions": m.preempted.astype("int64"),
        "x_Attempts": first_bucket.astype("int64"),
        "x_RestartOverheadCost": m.restart_overhead_usd,
        "x_PreemptionLossCost": m.preemption_loss_usd,
        "x_IdleCost": m.idle_usd,
        "seg_start": seg_s,
        "seg_end": seg_e,
    }
    return rows, bucket, measures


def _piecewise_cost(
    cost: np.ndarray, rows: np.ndarray, seg_s: np.ndarray, seg_e: np.ndarray, iv: Intervals, price: np.ndarray,
    nodes: np.ndarray, changes: PriceChanges,
) -> np.ndarray:
    """Segment costs of the (few) attempts with price changes, price piece by price piece."""
    import numpy as np

    cost = cost.copy()
    for i, (at, prices) in changes.items():
        lo, hi = np.searchsorted(rows, i, "left"), np.searchsorted(rows, i, "right")
        if lo == hi:
            continue
        pieces = price_pieces(float(iv.start[i]), float(iv.bill_end[i]), float(price[i]), zip(at.tolist(), prices.tolist()))
        t0, t1, p = (np.array(col, dtype="float64")[None, :] for col in zip(*pieces))
        # summed piece after piece, as the one-attempt path sums them (the same float)
        cost[lo:hi] = sum(_piece_usd(np, t0, t1, p, seg_s[lo:hi, None], seg_e[lo:hi, None]).T) * nodes[i]
    return cost
