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
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from launcher.cost.attempts import AttemptColumns, Intervals, billed_intervals, bucket_first, explode, overlap, segments  # noqa: F401 - explode, overlap, bucket_first: the report's too
from launcher.cost.window import Window
from launcher.cost.storage import (
    CHECKPOINT_KEEP_LAST,
    CHECKPOINT_RETENTION_AFTER_RUN_S,
    DEFAULT_STORAGE_USD_PER_GB_MONTH,
    OTHER_STORAGE_USD_PER_GB_MONTH,
)


@dataclass(frozen=True)
class CostAssumptions:
    storage_usd_per_gb_month: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_STORAGE_USD_PER_GB_MONTH)
    )
    default_storage_usd_per_gb_month: float = OTHER_STORAGE_USD_PER_GB_MONTH
    checkpoint_keep_last: int = CHECKPOINT_KEEP_LAST
    checkpoint_retention_after_run_s: float = CHECKPOINT_RETENTION_AFTER_RUN_S

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


def _columns(attempts: pd.DataFrame) -> AttemptColumns:
    return AttemptColumns(
        started_at=attempts["started_at"].to_numpy(dtype="float64"),
        ended_at=attempts["ended_at"].to_numpy(dtype="float64"),
        billed_seconds=attempts["billed_seconds"].to_numpy(dtype="float64"),
        teardown_at=_col(attempts, "teardown_at"),
        num_nodes=attempts["num_nodes"].to_numpy(dtype="float64"),
        price_usd_per_hour=attempts["price_usd_per_hour"].to_numpy(dtype="float64"),
        on_demand_price_usd_per_hour=attempts["on_demand_price_usd_per_hour"].to_numpy(dtype="float64"),
        seq=attempts["seq"].to_numpy(),
        overhead_s=_col(attempts, "overhead_s"),
        resume_at=_col(attempts, "resume_at"),
        last_ckpt_at=_col(attempts, "last_ckpt_at"),
        preempted=attempts["preempted"].to_numpy(dtype=bool),
    )


def _price_changes(attempts: pd.DataFrame, prices: pd.DataFrame | None, *, unique_only: bool) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Attempt row -> (times, per-node prices) in time order, for attempts with price events.
    `unique_only`: leave out an id that names several rows (else its first row)."""
    if prices is None or not len(prices) or "attempt_id" not in attempts:
        return {}
    ids = attempts["attempt_id"]
    known = ids.notna().to_numpy()  # ids are loaded only where prices changed
    pos = pd.Series(np.flatnonzero(known), index=ids.to_numpy()[known])
    dup = pos.index.duplicated(keep=False) if unique_only else pos.index.duplicated()
    pos = pos[~dup]
    out = {}
    for attempt_id, changes in prices.sort_values("at").groupby("attempt_id", sort=False):
        i = pos.get(attempt_id)
        if i is not None:
            out[int(i)] = (changes["at"].to_numpy(dtype="float64"), changes["price_usd_per_hour"].to_numpy(dtype="float64"))
    return out


def attempt_intervals(attempts: pd.DataFrame, facts: EventFacts, as_of: float) -> pd.DataFrame:
    """Per attempt: billed interval, average rates and the waste intervals (all epoch seconds).

    `attempts` has the ledger's attempt columns with started_at/ended_at as float epoch seconds,
    `preempted` (bool) and the event facts per attempt (NaN where unknown): teardown_at,
    resume_at (first `recovery` event), overhead_s (its restart_overhead_seconds) and
    last_ckpt_at.
    Returns a frame aligned with `attempts` holding: start, job_end, bill_end, billed_s,
    rate_usd_per_hour (all nodes, average over the billed interval), list_rate_usd_per_hour,
    overhead_end, loss_start, preempted (launcher.cost.attempts.billed_intervals).
    """
    iv = billed_intervals(_columns(attempts), _price_changes(attempts, facts.prices, unique_only=True), as_of)
    return pd.DataFrame({f.name: getattr(iv, f.name) for f in fields(Intervals)}, index=attempts.index)


def _intervals(frame: pd.DataFrame) -> Intervals:
    return Intervals(**{f.name: frame[f.name].to_numpy() for f in fields(Intervals)})


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
    return segments(
        _intervals(intervals),
        attempts["num_nodes"].to_numpy(dtype="float64"),
        attempts["price_usd_per_hour"].to_numpy(dtype="float64"),
        edges,
        gpu_count,
        _price_changes(attempts, prices, unique_only=False),
    )


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
