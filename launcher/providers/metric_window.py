"""What a monitoring series says about a window, counted in time, not in datapoints.

A datapoint stands for its period: CloudWatch stamps a point with the start of its period
(300 s for EC2 basic monitoring, 60 s detailed, the CloudWatch agent's own interval), Cloud
Monitoring's aligned points with the end of theirs (60 s alignment). Laid end to end, the
points' periods cover some of the window; the rest is a gap, and a gap is "unknown", never idle.

Late data: CloudWatch and Cloud Monitoring deliver the newest minutes late. When the newest
point ends within `late_allowance` of the time asked, the judged window is the `window` that ends
with that point (the undelivered minutes are reported, not counted either way); when it ends
earlier, the window ends at the time asked and the missing minutes are a gap like any other.

Level = the time-weighted mean (the Average statistic) over the covered part of the judged
window; peak = the highest Maximum of any point delivered (busy once is busy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from launcher.providers.base import IdleSignals, MetricCoverage, MetricPoint

# Late data tolerated before the newest minutes count as a gap: CloudWatch publishes a basic
# (5-minute) point up to about 10 minutes after its period starts; Cloud Monitoring's GCE
# metrics arrive up to about 4 minutes late (sampled every 60 s, "up to 240 s" of latency).
LATE_ALLOWANCE = timedelta(minutes=20)


def point(start: datetime, period_s: int, mean: float, peak: float | None = None) -> MetricPoint:
    return MetricPoint(start=start, period_s=period_s, mean=mean, peak=mean if peak is None else peak)


def merge_busiest(series: Iterable[Sequence[MetricPoint]]) -> list[MetricPoint]:
    """Several series of one machine (one per GPU) as one: per period start, the busiest."""
    best: dict[datetime, MetricPoint] = {}
    for points in series:
        for p in points:
            have = best.get(p.start)
            if have is None:
                best[p.start] = p
            else:
                best[p.start] = MetricPoint(p.start, max(p.period_s, have.period_s), max(p.mean, have.mean), max(p.peak, have.peak))
    return [best[k] for k in sorted(best)]


def native_period_s(starts: Sequence[datetime], asked_s: int) -> int:
    """The period a series really has, from the spacing of its points (the median step, in whole
    minutes), never finer than the period asked: a CloudWatch agent publishing every 300 s answers
    a 60 s query with one point in five."""
    ordered = sorted(set(starts))
    steps = sorted((b - a).total_seconds() for a, b in zip(ordered, ordered[1:], strict=False))
    if not steps:
        return asked_s
    median = steps[len(steps) // 2]
    return max(asked_s, int(round(median / 60.0)) * 60)


def summarize(
    points: Sequence[MetricPoint],
    *,
    asked_until: datetime,
    window: timedelta,
    late_allowance: timedelta = LATE_ALLOWANCE,
) -> tuple[float | None, float, MetricCoverage | None]:
    """(level, covered minutes, coverage) of one series over the judged window."""
    if not points:
        return None, 0.0, None
    pts = sorted(points, key=lambda p: p.start)
    newest_end = min(asked_until, max(p.start + timedelta(seconds=p.period_s) for p in pts))
    end = newest_end if asked_until - newest_end <= late_allowance else asked_until
    start = end - window
    covered = timedelta(0)
    weighted = 0.0
    gaps: list[tuple[datetime, datetime]] = []
    cursor = start
    for p in pts:
        a = max(p.start, start)
        b = min(p.start + timedelta(seconds=p.period_s), end)
        if b <= a:
            continue
        if a > cursor:
            gaps.append((cursor, a))
        new_from = max(a, cursor)  # overlapping periods are counted once
        if b > new_from:
            covered += b - new_from
            weighted += p.mean * (b - new_from).total_seconds()
            cursor = b
    if cursor < end:
        gaps.append((cursor, end))
    recent = [p for p in pts if p.start + timedelta(seconds=p.period_s) > start]
    peak_p = max(recent, key=lambda p: p.peak) if recent else None
    level = weighted / covered.total_seconds() if covered > timedelta(0) else None
    cov = MetricCoverage(
        period_s=max(p.period_s for p in pts),
        window_start=start,
        window_end=end,
        gaps=tuple(gaps),
        peak_pct=peak_p.peak if peak_p else None,
        peak_at=peak_p.start if peak_p else None,
        asked_until=asked_until,
    )
    return level, covered.total_seconds() / 60, cov


def idle_signals(
    cpu_series: Sequence[Sequence[MetricPoint]],
    gpu_series: Sequence[Sequence[MetricPoint]],
    *,
    asked_until: datetime,
    window: timedelta,
) -> IdleSignals:
    """One machine's signals from its CPU and GPU series (one series per GPU, each as delivered),
    judged over `window` ending at `asked_until`: the busiest series at each period counts."""
    c, g = merge_busiest(cpu_series), merge_busiest(gpu_series)
    c_level, c_min, c_cov = summarize(c, asked_until=asked_until, window=window)
    g_level, g_min, g_cov = summarize(g, asked_until=asked_until, window=window)
    return IdleSignals(
        gpu_utilization_pct=g_level,
        cpu_utilization_pct=c_level,
        samples=len(c) + sum(len(points) for points in gpu_series),
        gpu_covered_minutes=g_min if g_cov else None,
        cpu_covered_minutes=c_min if c_cov else None,
        gpu_coverage=g_cov,
        cpu_coverage=c_cov,
    )
