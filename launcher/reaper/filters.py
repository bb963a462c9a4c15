"""Idleness filters: small registered classes, each looking at one signal.

Each filter returns a Verdict: BUSY (activity seen), IDLE (evidence of idleness), or UNKNOWN
(no evidence either way: metric not published, instance unknown to that source). The decision
(decide.py) combines them: any BUSY keeps the instance; it is idle only with at least one IDLE
and no BUSY.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from launcher.providers.base import IdleSignals, InstanceInfo
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
    def evaluate(self, obs: Observation, policy: ProjectPolicy, now: datetime) -> FilterResult: ...


# Datapoints align to periods: evidence covering this share of the window counts as the window.
COVERAGE_SHARE = 0.9


class _Utilization(IdleFilter):
    """Busy at or above the policy's threshold (any sample of activity is proof of use); idle
    only when the figure covers the whole window. Unknown where the metric is not published or
    covers less of the window (a machine or job younger than the window is kept)."""

    label = ""

    def value(self, s: IdleSignals) -> float | None:
        raise NotImplementedError

    def covered(self, s: IdleSignals) -> float | None:
        raise NotImplementedError

    def limit(self, policy: ProjectPolicy) -> float:
        raise NotImplementedError

    def evaluate(self, obs, policy, now):
        v = None if obs.signals is None else self.value(obs.signals)
        if v is None:
            return FilterResult(self.name, Verdict.UNKNOWN, f"{self.label} utilization not published")
        limit, window = self.limit(policy), policy.idle.window_minutes
        covered = self.covered(obs.signals)
        span = f"the last {window} min" if covered is not None and covered >= window else f"{_minutes(covered)} of the {window} min window"
        text = f"{self.label} {v:.1f}% over {span} (idle below {limit:g}%)"
        if v >= limit:
            return FilterResult(self.name, Verdict.BUSY, text)
        if covered is None or covered < COVERAGE_SHARE * window:
            return FilterResult(self.name, Verdict.UNKNOWN, f"{text}; too little history to call it idle")
        return FilterResult(self.name, Verdict.IDLE, text)


def _minutes(m: float | None) -> str:
    if m is None:
        return "an unknown part"
    return f"{m:.1f}" if m < 10 else f"{m:.0f}"


@register
class GpuUtilization(_Utilization):
    name, label = "gpu-utilization", "GPU"

    def value(self, s):
        return s.gpu_utilization_pct

    def covered(self, s):
        return s.gpu_covered_minutes

    def limit(self, policy):
        return policy.idle.gpu_util_below_pct


@register
class CpuUtilization(_Utilization):
    name, label = "cpu-utilization", "CPU"

    def value(self, s):
        return s.cpu_utilization_pct

    def covered(self, s):
        return s.cpu_covered_minutes

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


def evaluate_all(obs: Observation, policy: ProjectPolicy, now: datetime) -> list[FilterResult]:
    return [cls().evaluate(obs, policy, now) for cls in FILTERS.values()]
