"""Cost arithmetic (pure): what part of an attempt's cost falls inside a time window."""

from __future__ import annotations

from datetime import datetime


def attempt_cost_in_window(
    started_at: datetime,
    ended_at: datetime | None,
    billed_seconds: float | None,
    price_usd_per_hour: float,
    num_nodes: int,
    *,
    now: datetime,
    since: datetime | None = None,
    until: datetime | None = None,
) -> float:
    """billed (or elapsed, while open) hours x price x nodes, pro rata to the overlap of
    [started_at, ended_at or now] with [since, until)."""
    end = ended_at or now
    elapsed_s = max(0.0, (end - started_at).total_seconds())
    seconds = billed_seconds if billed_seconds is not None else elapsed_s
    full = seconds / 3600.0 * price_usd_per_hour * num_nodes
    if since is None and until is None:
        return full
    if elapsed_s == 0.0:  # an instant: in or out
        inside = (since is None or started_at >= since) and (until is None or started_at < until)
        return full if inside else 0.0
    lo = max(started_at, since) if since is not None else started_at
    hi = min(end, until) if until is not None else end
    overlap_s = max(0.0, (hi - lo).total_seconds())
    return full * overlap_s / elapsed_s
