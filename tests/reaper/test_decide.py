"""The pure reap decision: never touch unmanaged/protected/busy; mark, then act after grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from launcher.providers.base import IdleSignals, InstanceInfo
from launcher.reaper.decide import MARK_TAG, DecisionKind, decide, format_mark, parse_expiry, parse_mark
from launcher.reaper.filters import Observation
from launcher.reaper.policy import ProjectPolicy

NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
POLICY = ProjectPolicy(grace_minutes=60)


def inst(**tags) -> InstanceInfo:
    base = {"managed-by": "gpu-launcher", "project": "p"}
    base.update(tags)
    return InstanceInfo(provider="aws", region="us-east-1", zone=None, instance_id="i-1", instance_type="g5.xlarge", state="running", spot=True, tags=base)


def obs(instance=None, gpu=None, cpu=None, running=False, known=True, beat=None, signals=True) -> Observation:
    return Observation(
        instance=instance or inst(),
        signals=IdleSignals(gpu, cpu, gpu_covered_minutes=60, cpu_covered_minutes=60) if signals else None,
        ledger_known=known,
        ledger_running=running,
        last_heartbeat=beat,
        stack=None,
    )


def test_unmanaged_is_skipped_even_when_idle():
    i = InstanceInfo("aws", "us-east-1", None, "i-x", "g5.xlarge", "running", False, {"project": "p"})
    d = decide(obs(i, gpu=0, cpu=0), POLICY, NOW)
    assert d.decision is DecisionKind.SKIP
    assert "not managed" in d.reasons[0]


def test_protected_tag_is_skipped_case_insensitively():
    d = decide(obs(inst(**{"keep-alive": "TRUE"}), gpu=0, cpu=0), POLICY, NOW)
    assert d.decision is DecisionKind.SKIP
    assert "protected" in d.reasons[0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu": 80.0, "cpu": 1.0},  # GPU busy
        {"gpu": None, "cpu": 50.0},  # CPU busy, GPU unpublished
        {"gpu": 0.0, "cpu": 0.0, "beat": NOW - timedelta(minutes=5)},  # fresh heartbeat
    ],
)
def test_busy_is_kept_and_mark_cleared(kwargs):
    marked = inst(**{MARK_TAG: format_mark(NOW - timedelta(hours=5))})
    d = decide(obs(marked, **kwargs), POLICY, NOW)
    assert d.decision is DecisionKind.KEEP
    assert d.clear_mark is True
    assert "busy" in d.reasons


def test_running_attempt_without_metrics_is_kept_but_a_stalled_one_is_marked():
    kept = decide(obs(running=True, signals=False), POLICY, NOW)
    assert kept.decision is DecisionKind.KEEP
    assert "attempt running and no idle metrics" in kept.reasons
    stalled = decide(obs(running=True, gpu=0.0, cpu=0.5), POLICY, NOW)
    assert stalled.decision is DecisionKind.MARK  # autostop on the node cannot see this


def test_idle_unmarked_gets_marked():
    d = decide(obs(gpu=1.0, cpu=2.0), POLICY, NOW)
    assert d.decision is DecisionKind.MARK


def test_idle_marked_within_grace_is_kept():
    marked = inst(**{MARK_TAG: format_mark(NOW - timedelta(minutes=59))})
    d = decide(obs(marked, gpu=1.0, cpu=2.0), POLICY, NOW)
    assert d.decision is DecisionKind.KEEP
    assert d.clear_mark is False
    assert any("grace until" in r for r in d.reasons)


def test_idle_marked_after_grace_acts():
    marked = inst(**{MARK_TAG: format_mark(NOW - timedelta(minutes=60))})
    d = decide(obs(marked, gpu=1.0, cpu=2.0), POLICY, NOW)
    assert d.decision is DecisionKind.ACT
    assert d.marked_at == NOW - timedelta(minutes=60)


def test_thresholds_are_strict_below():
    # exactly at the threshold is not idle
    d = decide(obs(gpu=POLICY.idle.gpu_util_below_pct, cpu=0.0), POLICY, NOW)
    assert d.decision is DecisionKind.KEEP


def test_orphan_without_metrics_is_not_reaped_on_ledger_evidence_alone():
    d = decide(obs(known=False, signals=False), POLICY, NOW)
    assert d.decision is DecisionKind.KEEP
    assert any("no idle evidence" in r for r in d.reasons)


def test_expired_orphan_without_metrics_is_marked():
    exp = (NOW - timedelta(hours=1)).isoformat()
    d = decide(obs(inst(**{"expires-at": exp}), known=False, signals=False), POLICY, NOW)
    assert d.decision is DecisionKind.MARK
    assert any("expired" in r for r in d.reasons)


def test_expired_but_busy_is_never_touched():
    exp = (NOW - timedelta(hours=1)).isoformat()
    d = decide(obs(inst(**{"expires-at": exp}), gpu=90.0), POLICY, NOW)
    assert d.decision is DecisionKind.KEEP


def test_stale_heartbeat_counts_as_idle_evidence():
    d = decide(obs(signals=False, beat=NOW - timedelta(hours=2)), POLICY, NOW)
    assert d.decision is DecisionKind.MARK


def test_terminated_is_skipped():
    i = InstanceInfo("aws", "us-east-1", None, "i-1", "g5.xlarge", "terminated", True, {"managed-by": "gpu-launcher"})
    assert decide(obs(i, gpu=0, cpu=0), POLICY, NOW).decision is DecisionKind.SKIP


def test_mark_and_expiry_formats_round_trip():
    t = datetime(2026, 11, 30, 8, 15, 42, tzinfo=UTC)
    assert parse_mark(format_mark(t)) == t
    assert format_mark(t) == format_mark(t).lower()  # GCP label-safe
    assert parse_mark("garbage") is None
    assert parse_expiry("2026-11-30T08:15:42Z") == t
    assert parse_expiry("2026-11-30t08-15-42z") == t
