"""Report math against the hand-built ledger in conftest.py (figures worked out by hand)."""

from __future__ import annotations

import pandas as pd
import pytest

from launcher.report import ReportQuery, build_report, parse_window
from launcher.ledger.attempt_cost import CostAssumptions

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


def test_by_day_splits_an_attempt_across_midnight(hand_ledger):
    f = report(hand_ledger, by="experiment,day").frame
    b = f[f["x_ExperimentId"] == "exp-b"].sort_values("ChargePeriodStart")
    # -1h..1h at $4/h: $4 on Nov 2 (23:00-24:00) and $4 on Nov 3
    assert [str(t.date()) for t in b["ChargePeriodStart"]] == ["2026-11-02", "2026-11-03"]
    assert list(b["BilledCost"]) == pytest.approx([4.0, 4.0])
    # the attempt is counted once, in its first day
    assert list(b["x_Attempts"]) == [1, 0]
    nov3 = b.iloc[1]
    assert nov3["ChargePeriodStart"].isoformat() == "2026-11-03T00:00:00+00:00"
    # the window closes at the clock (6h) when --until is not given
    assert nov3["ChargePeriodEnd"].isoformat() == "2026-11-03T06:00:00+00:00"


def test_by_project_and_owner_and_cloud(hand_ledger):
    p = report(hand_ledger, by="project").frame
    assert row(p, "x_ProjectId", "vision")["BilledCost"] == pytest.approx(13.30)  # exp-a + exp-c
    assert row(p, "x_ProjectId", "nlp")["BilledCost"] == pytest.approx(8.0)  # whole attempt, no window
    assert row(p, "x_ProjectId", "vision")["x_Runs"] == 2
    o = report(hand_ledger, by="owner").frame
    assert row(o, "x_Owner", "alice")["BilledCost"] == pytest.approx(13.30)
    cc = report(hand_ledger, by="cost-center").frame
    assert row(cc, "x_CostCenter", "cc-2")["BilledCost"] == pytest.approx(8.0)
    c = report(hand_ledger, by="cloud").frame
    assert set(c["ProviderName"]) == {"AWS", "Google Cloud"}
    assert row(c, "ProviderName", "AWS")["x_SpotSavings"] == pytest.approx(17.0)


def test_month_filter_and_windows(hand_ledger):
    oct_ = report(hand_ledger, month="2026-10").frame
    assert oct_.empty
    nov = report(hand_ledger, by="month", month="2026-11").frame
    assert len(nov) == 1
    assert nov.iloc[0]["BilledCost"] == pytest.approx(21.30)
    # a window that ends at 1:00 keeps only the first hour of a1 (no preemption inside yet)
    early = report(hand_ledger, since="2026-11-03T00:00:00Z", until="2026-11-03T01:00:00Z").frame
    a = row(early, "x_ExperimentId", "exp-a")
    assert a["x_ComputeCost"] == pytest.approx(2.0)
    assert a["x_Preemptions"] == 0
    assert a["x_PreemptionLossCost"] == pytest.approx(0.0)
    # the 0.5h checkpoint is stored 0.5h inside the window: 5 GB-hours
    assert a["x_CheckpointStorageCost"] == pytest.approx(0.05)


def test_checkpoint_keep_last_one(hand_ledger):
    keep1 = CostAssumptions(storage_usd_per_gb_month={"aws": 7.3}, checkpoint_keep_last=1)
    f = report(hand_ledger, assumptions=keep1).frame
    # 0.5h->1.5h, 1.5h->3h, 3h->6h (clock): 5.5 h x 10 GB x $0.01
    assert row(f, "x_ExperimentId", "exp-a")["x_CheckpointStorageCost"] == pytest.approx(0.55)


def test_spot_price_history_and_explicit_restart_overhead(hand_ledger):
    a2 = hand_ledger.attempts("r-vision-1")[1]
    from .conftest import h

    hand_ledger.add_event("r-vision-1", "price", {"price_usd_per_hour": 1.6}, attempt_id=a2.attempt_id, at=h(3))
    hand_ledger.add_event(
        "r-vision-1", "recovery", {"restart_overhead_seconds": 1800}, attempt_id=a2.attempt_id, at=h(2.3)
    )
    a = row(report(hand_ledger).frame, "x_ExperimentId", "exp-a")
    # a2: (1 h x $1.20 + 1.5 h x $1.60) x 2 nodes = 7.20; with a1's 4.00 -> 11.20
    assert a["x_ComputeCost"] == pytest.approx(11.20)
    # average a2 rate 7.20 / 2.5 h = $2.88/h; overhead 0.5 h -> 1.44; idle 0.5 h -> 1.44
    assert a["x_RestartOverheadCost"] == pytest.approx(1.44)
    assert a["x_IdleCost"] == pytest.approx(1.44)
    assert a["x_SpotSavings"] == pytest.approx(27.0 - 11.20)


def test_attempt_rows_carry_focus_dimensions_and_tags(hand_ledger):
    import json

    f = report(hand_ledger, by="attempt").frame
    assert len(f) == 4
    a1 = row(f, "x_AttemptId", hand_ledger.attempts("r-vision-1")[0].attempt_id)
    assert a1["ProviderName"] == "AWS"
    assert a1["RegionId"] == "us-east-1"
    assert a1["AvailabilityZone"] == "us-east-1a"
    assert a1["ResourceId"] == "c-vision-1"
    assert a1["SkuId"] == "g5.xlarge"
    assert a1["PricingCategory"] == "Dynamic"
    assert a1["ListUnitPrice"] == pytest.approx(3.0)
    assert a1["PricingQuantity"] == pytest.approx(4.0)
    assert json.loads(a1["Tags"]) == {"team": "vision"}
    assert a1["x_ExperimentId"] == "exp-a"
    gcp = f[f["ProviderName"] == "Google Cloud"].iloc[0]
    assert gcp["PricingCategory"] == "Standard"


def test_focus_and_x_column_names(hand_ledger):
    cols = set(report(hand_ledger).frame.columns)
    focus = {"BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
             "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd"}  # fmt: skip
    ours = {"x_ExperimentId", "x_GpuHours", "x_Preemptions", "x_SpotSavings", "x_WastedCost",
            "x_CheckpointStorageCost", "x_Runs", "x_Attempts"}  # fmt: skip
    assert focus | ours <= cols
    # every column is either a FOCUS name (PascalCase) or ours (x_ prefix)
    assert all(c.startswith("x_") or c[0].isupper() for c in cols)


def test_loader_strategies_agree(hand_ledger_path):
    """With or without the events(attempt_id, kind, at) index (schema 0002 has it) the report is
    the same. (Per-attempt lookups vs one GROUP BY is covered by the cache tests: the incremental
    refresh uses lookups, a full read the GROUP BY.)"""
    import sqlite3

    from launcher.ledger import Ledger
    from launcher.ledger.readers import has_attempt_event_index

    from .conftest import Clock

    def frame():
        with Ledger(f"sqlite:///{hand_ledger_path}", now=Clock(NOW)) as led:
            with led.engine.connect() as conn:
                indexed = has_attempt_event_index(conn)
            return indexed, report(led, by="attempt").frame.sort_values("x_AttemptId").reset_index(drop=True)

    indexed, with_index = frame()  # the schema has the index since revision 0002
    con = sqlite3.connect(hand_ledger_path)
    con.execute("DROP INDEX ix_events_attempt_id_kind_at")
    con.commit()
    con.close()
    plain_indexed, plain = frame()
    assert (plain_indexed, indexed) == (False, True)
    pd.testing.assert_frame_equal(plain, with_index)
    assert plain["x_WastedCost"].sum() == pytest.approx(2.80)


@pytest.mark.postgres
def test_same_report_on_postgresql(hand_ledger, pg_schema_url):
    """The hand-built ledger rebuilt on a real PostgreSQL server (times via EXTRACT(EPOCH), JSON
    via ->>, LEAD over timestamptz) gives the same report as on SQLite."""
    from .conftest import build_hand_ledger

    led, clock = build_hand_ledger(pg_schema_url)
    assert clock() == NOW
    try:
        for by in ("experiment", "project,day", "attempt"):
            on_sqlite = report(hand_ledger, by=by).frame
            keys = [c for c in on_sqlite.columns if c.startswith("x_") and c.endswith("Id")] + ["ChargePeriodStart"]
            q = ReportQuery(by=tuple(by.split(",")), window=parse_window(), assumptions=STORAGE)
            for use_cache in (False, True, True):  # direct, cache built, cache read
                on_pg = build_report(led, q, now=NOW, use_cache=use_cache).frame
                pd.testing.assert_frame_equal(
                    on_pg.sort_values(keys).reset_index(drop=True),
                    on_sqlite.sort_values(keys).reset_index(drop=True),
                    check_dtype=False,
                )
    finally:
        led.close()
