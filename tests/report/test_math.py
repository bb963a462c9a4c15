"""Report math against the hand-built ledger in conftest.py (figures worked out by hand)."""

from __future__ import annotations

import pytest

from launcher.report import ReportQuery, build_report, parse_window
from launcher.report.costs import CostAssumptions

from .conftest import NOW

# 7.30 $/GB-month makes 1 GB-hour cost exactly $0.01.
STORAGE = CostAssumptions(storage_usd_per_gb_month={"aws": 7.3, "gcp": 7.3})


def report(led, by="experiment", since=None, until=None, month=None, assumptions=STORAGE):
    q = ReportQuery(by=tuple(by.split(",")), window=parse_window(since, until, month), assumptions=assumptions)
    return build_report(led, q, now=NOW)


def row(frame, col, value):
    hits = frame[frame[col] == value]
    assert len(hits) == 1, f"{col}={value}: {len(hits)} rows"
    return hits.iloc[0]


def test_experiment_costs_by_hand(hand_ledger):
    f = report(hand_ledger, since="2026-11-03", until="2026-11-03").frame
    a = row(f, "x_ExperimentId", "exp-a")
    # a1: 2 h x 2 nodes x $1.00 = 4.00; a2 billed to teardown: 2.5 h x 2 x $1.20 = 6.00
    assert a["x_ComputeCost"] == pytest.approx(10.0)
    # checkpoints 10 GB at 0.5h, 1.5h, 3h kept (keep_last=3) to the clock at 6h: 13 h x 10 GB x $0.01
    assert a["x_CheckpointStorageCost"] == pytest.approx(1.30)
    assert a["BilledCost"] == pytest.approx(11.30)
    assert a["EffectiveCost"] == pytest.approx(11.30)
    # list: (2 h + 2.5 h) x 2 nodes x $3.00 = 27.00, plus storage
    assert a["ListCost"] == pytest.approx(28.30)
    assert a["x_SpotSavings"] == pytest.approx(17.0)
    # preemption loss: 1.5h..2h at $2/h = 1.00; restart overhead 2h..2.25h at $2.40/h = 0.60;
    # idle 4h..4.5h at $2.40/h = 1.20
    assert a["x_PreemptionLossCost"] == pytest.approx(1.00)
    assert a["x_RestartOverheadCost"] == pytest.approx(0.60)
    assert a["x_IdleCost"] == pytest.approx(1.20)
    assert a["x_WastedCost"] == pytest.approx(2.80)
    assert a["x_Preemptions"] == 1
    assert a["x_Attempts"] == 2
    assert a["x_Runs"] == 1
    assert a["x_NodeHours"] == pytest.approx(9.0)
    assert a["x_GpuHours"] == pytest.approx(9.0)

    b = row(f, "x_ExperimentId", "exp-b")
    # -1h..1h on-demand at $4: only the half inside 2026-11-03 counts
    assert b["BilledCost"] == pytest.approx(4.0)
    assert b["x_SpotSavings"] == pytest.approx(0.0)
    assert b["x_GpuHours"] == pytest.approx(8.0)
    c = row(f, "x_ExperimentId", "exp-c")
    # open attempt counted up to the clock: 1 h x $2.00
    assert c["BilledCost"] == pytest.approx(2.0)
    assert c["x_GpuHours"] == pytest.approx(4.0)
    # sorted by cost, most expensive first
    assert list(f["x_ExperimentId"]) == ["exp-a", "exp-b", "exp-c"]
