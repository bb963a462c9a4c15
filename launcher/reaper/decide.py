"""The pure decision for one instance: keep | mark | act | skip, with the reasons.

Mark then act: the first pass that finds an instance idle tags it with a dated mark; a later
pass acts once the grace period has passed and it is still idle; activity in between clears
the mark. Never touched: instances without our managed tag, protected ones, busy ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from launcher.providers.base import MANAGED_BY_TAG, MANAGED_BY_VALUE
from launcher.reaper.filters import Observation, Verdict, evaluate_all, parse_tag_time
from launcher.reaper.policy import ProjectPolicy

MARK_TAG = "reap-marked-at"
# GCP labels allow only [a-z0-9_-]: the mark's timestamp uses this form on every cloud.
MARK_FORMAT = "%Y%m%dt%H%M%Sz"
GONE_STATES = frozenset({"terminated", "shutting-down", "stopping", "stopped"})


class DecisionKind(StrEnum):
    KEEP = "keep"
    MARK = "mark"
    ACT = "act"
    SKIP = "skip"


@dataclass(frozen=True)
class ReapDecision:
    decision: DecisionKind
    reasons: list[str] = field(default_factory=list)
    clear_mark: bool = False  # activity since an earlier mark: remove it
    marked_at: datetime | None = None


def format_mark(at: datetime) -> str:
    return at.astimezone(UTC).strftime(MARK_FORMAT)


def parse_mark(value: str | None) -> datetime | None:
    if not value:  # '' = cleared (stores that cannot delete a tag blank it)
        return None
    try:
        return datetime.strptime(value, MARK_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_expiry(value: str | None) -> datetime | None:
    """`expires-at` as written by infra/tags.py: ISO 8601, or the GCP-label form."""
    return parse_tag_time(value)


def decide(obs: Observation, policy: ProjectPolicy, now: datetime) -> ReapDecision:
    inst = obs.instance
    tags = inst.tags
    if tags.get(MANAGED_BY_TAG) != MANAGED_BY_VALUE:
        return ReapDecision(DecisionKind.SKIP, ["not managed by gpu-launcher"])
    for k, v in policy.protected_tags.items():
        if tags.get(k, "").lower() == v.lower():
            return ReapDecision(DecisionKind.SKIP, [f"protected: {k}={tags[k]}"])
    if inst.state in GONE_STATES:
        return ReapDecision(DecisionKind.SKIP, [f"already {inst.state}"])

    results = evaluate_all(obs, policy, now)
    reasons = [f"{r.name}: {r.detail}" for r in results]
    if obs.signals_error:
        reasons.append(f"signals unavailable: {obs.signals_error}")
    busy = [r for r in results if r.verdict is Verdict.BUSY]
    idle = [r for r in results if r.verdict is Verdict.IDLE]
    expires_at = parse_expiry(tags.get("expires-at"))
    expired = policy.enforce_expiry and expires_at is not None and expires_at <= now
    if expired:
        reasons.append(f"expired at {expires_at.isoformat()}")
    marked_at = parse_mark(tags.get(MARK_TAG))

    if busy:
        return ReapDecision(DecisionKind.KEEP, reasons + ["busy"], clear_mark=marked_at is not None)
    # Without metrics, 'unknown to the ledger' alone is weak evidence; require a second idle
    # signal (stale heartbeat, low utilization) or an expiry before marking.
    metric_idle = [r for r in idle if r.name != "ledger"]
    if not (metric_idle or expired):
        why = "attempt running and no idle metrics" if obs.ledger_running else "no idle evidence beyond the ledger"
        return ReapDecision(DecisionKind.KEEP, reasons + [why], clear_mark=marked_at is not None)
    if marked_at is None:
        return ReapDecision(DecisionKind.MARK, reasons + ["idle: marking"])
    grace_end = marked_at + timedelta(minutes=policy.grace_minutes)
    if now >= grace_end:
        return ReapDecision(DecisionKind.ACT, reasons + [f"idle since mark at {marked_at.isoformat()}; grace over: {policy.action}"], marked_at=marked_at)
    return ReapDecision(DecisionKind.KEEP, reasons + [f"marked at {marked_at.isoformat()}; grace until {grace_end.isoformat()}"], marked_at=marked_at)
