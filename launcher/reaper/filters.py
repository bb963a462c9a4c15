"""Idleness filters: small registered classes, each looking at one signal.

Each filter returns a Verdict: BUSY (activity seen), IDLE (evidence of idleness), or UNKNOWN
(no evidence either way: metric not published, instance unknown to that source). The decision
(decide.py) combines them: any BUSY keeps the instance; it is idle only with at least one IDLE
and no BUSY.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from launcher.providers.base import IdleSignals, InstanceInfo, MetricCoverage
from launcher.reaper.policy import ProjectPolicy


class Verdict(StrEnum):
    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Observation:
    """Everything known about one instance at pass time (gathered by the runner)."""

    instance: InstanceInfo
    signals: IdleSignals | None  # None = could not be read (API error)
    ledger_known: bool  # the ledger knows its cluster or run
    ledger_running: bool  # the ledger has an open attempt on it
    last_heartbeat: datetime | None
    stack: str | None  # Pulumi stack owning it, when known
    signals_error: str | None = None


@dataclass(frozen=True)
class FilterResult:
    name: str
    verdict: Verdict
    detail: str


FILTERS: dict[str, type[IdleFilter]] = {}


def register(cls: type[IdleFilter]) -> type[IdleFilter]:
    FILTERS[cls.name] = cls
    return cls


class IdleFilter(abc.ABC):
    name: str = "base"

    @abc.abstractmethod
    def evaluate(self, obs: Observation, policy: ProjectPolicy, now: datetime) -> FilterResult | None: ...


# Gap tolerance: idle evidence must cover at least this share of the window, counted in time
# (each datapoint stands for its period): up to 6 of 60 minutes may be missing, i.e. one lost
# 5-minute basic-monitoring point. Late newest minutes are not gaps (metric_window.LATE_ALLOWANCE).
COVERAGE_SHARE = 0.9
MAX_GAPS_LISTED = 3


class _Utilization(IdleFilter):
    """Busy when the level (Average) or any period's peak (Maximum) reaches the policy's threshold:
    activity once is proof of use. Idle only when the figure covers the window (COVERAGE_SHARE,
    in time) and the machine is older than it (its launch time, from the cloud). Unknown where
    the metric is not published, covers less of the window, or could not be read."""

    label = ""

    def value(self, s: IdleSignals) -> float | None:
        raise NotImplementedError

    def covered(self, s: IdleSignals) -> float | None:
        raise NotImplementedError

    def coverage(self, s: IdleSignals) -> MetricCoverage | None:
        raise NotImplementedError

    def limit(self, policy: ProjectPolicy) -> float:
        raise NotImplementedError

    def evaluate(self, obs, policy, now):
        limit, window = self.limit(policy), policy.idle.window_minutes
        s = obs.signals
        cov = None if s is None else self.coverage(s)
        v = None if s is None else self.value(s)
        if v is None:
            if cov is not None:  # a series exists, but nothing of it falls in the window
                return FilterResult(self.name, Verdict.UNKNOWN, f"{self.label} no data in the {window} min window{_notes(cov)}")
            if obs.signals_error:
                return FilterResult(self.name, Verdict.UNKNOWN, f"{self.label} utilization unknown: the metrics could not be read")
            return FilterResult(self.name, Verdict.UNKNOWN, f"{self.label} utilization not published")
        covered = self.covered(s)
        if covered is not None and covered >= window:
            span = f"the {window} min to {_hm(cov.window_end)} UTC" if cov is not None and cov.undelivered else f"the last {window} min"
        else:
            span = f"{_minutes(covered)} of the {window} min window"
        text = f"{self.label} {v:.1f}% over {span} (idle below {limit:g}%)"
        if cov is not None and cov.peak_pct is not None and cov.peak_pct >= limit and v < limit:
            return FilterResult(self.name, Verdict.BUSY, f"{text}; peak {cov.peak_pct:.1f}% at {_hm(cov.peak_at)} UTC")
        if v >= limit:
            return FilterResult(self.name, Verdict.BUSY, text)
        notes = _notes(cov)
        launched = obs.instance.launched_at
        if cov is not None and launched is not None and launched > cov.window_start:
            return FilterResult(self.name, Verdict.UNKNOWN, f"{text}{notes}; launched {_hm(launched)} UTC, younger than the window: too little history to call it idle")
        if covered is None or covered < COVERAGE_SHARE * window:
            return FilterResult(self.name, Verdict.UNKNOWN, f"{text}{notes}; too little history to call it idle")
        return FilterResult(self.name, Verdict.IDLE, text + notes)


def _minutes(m: float | None) -> str:
    if m is None:
        return "an unknown part"
    return f"{m:.1f}" if m < 10 else f"{m:.0f}"


def _hm(at: datetime | None) -> str:
    return "?" if at is None else at.astimezone(UTC).strftime("%H:%M")


def _notes(cov: MetricCoverage | None) -> str:
    """Which minutes were missing (gaps: unknown) and which are not delivered yet (late)."""
    if cov is None:
        return ""
    out = ""
    if cov.gaps:
        listed = ", ".join(f"{_hm(a)}-{_hm(b)}" for a, b in cov.gaps[:MAX_GAPS_LISTED])
        more = f" and {len(cov.gaps) - MAX_GAPS_LISTED} more" if len(cov.gaps) > MAX_GAPS_LISTED else ""
        missing = sum((b - a).total_seconds() for a, b in cov.gaps) / 60
        out += f"; no data {listed} UTC{more} ({_minutes(missing)} min missing: unknown, not idle)"
    late = cov.undelivered
    if late is not None and (late[1] - late[0]).total_seconds() >= 60:
        out += f"; {_hm(late[0])}-{_hm(late[1])} UTC not delivered yet (late, not counted)"
    return out


@register
class GpuUtilization(_Utilization):
    name, label = "gpu-utilization", "GPU"

    def value(self, s):
        return s.gpu_utilization_pct

    def covered(self, s):
        return s.gpu_covered_minutes

    def coverage(self, s):
        return s.gpu_coverage

    def limit(self, policy):
        return policy.idle.gpu_util_below_pct


@register
class CpuUtilization(_Utilization):
    name, label = "cpu-utilization", "CPU"

    def value(self, s):
        return s.cpu_utilization_pct

    def covered(self, s):
        return s.cpu_covered_minutes

    def coverage(self, s):
        return s.cpu_coverage

    def limit(self, policy):
        return policy.idle.cpu_util_below_pct


@register
class LedgerAttempt(IdleFilter):
    name = "ledger"

    def evaluate(self, obs, policy, now):
        if obs.ledger_running:
            # Not proof of use: a stalled job keeps its attempt open. Metrics decide; without
            # them, decide() keeps the instance.
            return FilterResult(self.name, Verdict.UNKNOWN, "an attempt is running on it (idle only if metrics say so: a stalled job)")
        if obs.ledger_known:
            return FilterResult(self.name, Verdict.IDLE, "no running attempt")
        return FilterResult(self.name, Verdict.IDLE, "orphan: unknown to the ledger")


@register
class Heartbeat(IdleFilter):
    """The executor's job heartbeat (progress: new log output), not the controller's liveness."""

    name = "heartbeat"

    def evaluate(self, obs, policy, now):
        if obs.last_heartbeat is None:
            return FilterResult(self.name, Verdict.UNKNOWN, "no executor heartbeat recorded")
        age = now - obs.last_heartbeat
        stale = timedelta(minutes=policy.idle.heartbeat_stale_minutes)
        mins = age.total_seconds() / 60
        if age < stale:
            return FilterResult(self.name, Verdict.BUSY, f"heartbeat {mins:.0f} min ago")
        return FilterResult(self.name, Verdict.IDLE, f"heartbeat stale ({mins:.0f} min ago)")


@register
class Age(IdleFilter):
    """Never evidence either way; says how old the machine is by the cloud's own launch time
    (LaunchTime, creationTimestamp), and when a `created-at` tag (writable by anyone with tag
    rights) disagrees with it. Utilization filters use the same launch time."""

    name = "age"
    DISAGREE = timedelta(minutes=10)

    def evaluate(self, obs, policy, now):
        launched = obs.instance.launched_at
        if launched is None:
            return None
        hours = max(0.0, (now - launched).total_seconds() / 3600)
        text = f"launched {launched.astimezone(UTC).strftime('%Y-%m-%d %H:%M')} UTC ({hours:.1f} h ago, from the cloud)"
        tagged = parse_tag_time(obs.instance.tags.get("created-at"))
        if tagged is not None and abs(tagged - launched) > self.DISAGREE:
            text += (f"; the created-at tag says {tagged.strftime('%Y-%m-%d %H:%M')} UTC: "
                     "age is taken from the cloud's launch time, never the tag")
        return FilterResult(self.name, Verdict.UNKNOWN, text)


def parse_tag_time(value: str | None) -> datetime | None:
    """A timestamp tag (`created-at`, `expires-at`) as infra/tags.py writes it: ISO 8601, the
    GCP-label form, or the reaper's mark form."""
    if not value:
        return None
    for parse in (
        lambda v: datetime.fromisoformat(v.replace("Z", "+00:00")),
        lambda v: datetime.strptime(v.lower(), "%Y-%m-%dt%H-%M-%Sz").replace(tzinfo=UTC),
        lambda v: datetime.strptime(v, "%Y%m%dt%H%M%Sz").replace(tzinfo=UTC),
    ):
        try:
            dt = parse(value)
            return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def evaluate_all(obs: Observation, policy: ProjectPolicy, now: datetime) -> list[FilterResult]:
    """Every registered filter's result; a filter with nothing to say returns None."""
    return [r for cls in FILTERS.values() if (r := cls().evaluate(obs, policy, now)) is not None]
