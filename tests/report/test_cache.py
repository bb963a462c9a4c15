"""The incremental report cache gives the same report as reading the whole ledger, also after
the ledger changed, re-reading only what changed, and recovers from a broken cache."""

from __future__ import annotations

import pandas as pd
import pytest

from launcher.report import ReportQuery, build_report, parse_window

from .conftest import GB, NOW, h


def both(led, by="experiment", since=None, until=None) -> tuple[pd.DataFrame, str]:
    """The report read directly and through the cache (asserted equal), and how the cache took
    in the ledger's changes since the previous call (full or incremental refresh)."""
    from launcher.report.cache import ReportCache, default_cache_dir

    q = ReportQuery(by=tuple(by.split(",")), window=parse_window(since, until))
    direct = build_report(led, q, now=NOW).frame
    refresh = ReportCache(default_cache_dir(led.url), keep_last=3, retention_s=7 * 86400.0)
    refresh.frames(led)
    cached = build_report(led, q, now=NOW, use_cache=True).frame
    pd.testing.assert_frame_equal(direct, cached, check_dtype=False)
    return cached, refresh.stats.mode


def test_cache_matches_direct_reads_through_changes(hand_ledger):
    from launcher.ledger import NewAttempt, RunRecord

    first, mode = both(hand_ledger)
    assert mode == "full"  # no cache yet
    for by, since, until in (("project,day", None, None), ("cloud", "2026-11-03", "2026-11-03"), ("run", None, None)):
        _, mode = both(hand_ledger, by, since, until)
        assert mode == "unchanged"  # only the columns a report needs are read

    # the open attempt ends with no event at all (found only because it was open)
    (open_a,) = hand_ledger.open_attempts(run_id="r-vision-2")
    hand_ledger.end_attempt(open_a.attempt_id, "completed", ended_at=h(5.75))
    ended, mode = both(hand_ledger)
    assert mode == "incremental"
    assert ended.set_index("x_ExperimentId").loc["exp-c", "x_ComputeCost"] == pytest.approx(1.50)

    # late events on an ended attempt: a teardown (more billed time) and a checkpoint
    hand_ledger.add_event("r-vision-2", "checkpoint", {"size_bytes": 5 * GB}, attempt_id=open_a.attempt_id, at=h(5.5))
    hand_ledger.add_event("r-vision-2", "teardown", {}, attempt_id=open_a.attempt_id, at=h(5.9))
    torn, mode = both(hand_ledger)
    assert mode == "incremental"
    assert torn.set_index("x_ExperimentId").loc["exp-c", "x_ComputeCost"] == pytest.approx(1.80)
    assert torn.set_index("x_ExperimentId").loc["exp-c", "x_CheckpointStorageCost"] > 0

    # a new run with an open attempt: open attempts are always read fresh, the files stay
    hand_ledger.create_run(
        RunRecord(run_id="r-new", name="new", spec_hash="0" * 64, spec_yaml="run: x", project="nlp",
                  experiment="exp-new", created_at=h(5))
    )  # fmt: skip
    hand_ledger.add_attempt(
        "r-new", NewAttempt(cloud="gcp", region="us-central1", instance_type="n1", price_usd_per_hour=3.0),
        started_at=h(5.5),
    )  # fmt: skip
    after, mode = both(hand_ledger)
    assert mode == "unchanged"
    assert after.set_index("x_ExperimentId").loc["exp-new", "BilledCost"] == pytest.approx(1.50)
    assert set(after["x_ExperimentId"]) == set(first["x_ExperimentId"]) | {"exp-new"}

    # an attempt backfilled "long ago" for the cache's wall clock, already ended, no events:
    # nothing points at it but the attempt count, which forces a full read
    old = hand_ledger.add_attempt(
        "r-new", NewAttempt(cloud="gcp", region="us-central1", instance_type="n1", price_usd_per_hour=1.0),
        started_at=h(1),
    )  # fmt: skip
    hand_ledger.end_attempt(old.attempt_id, "failed", ended_at=h(2))
    backfilled, mode = both(hand_ledger)
    assert mode == "full"
    assert backfilled.set_index("x_ExperimentId").loc["exp-new", "BilledCost"] == pytest.approx(2.50)


def test_broken_cache_is_rebuilt(hand_ledger):
    from launcher.report.cache import ReportCache, default_cache_dir

    both(hand_ledger)
    d = default_cache_dir(hand_ledger.url)
    for p in d.glob("attempts-*.parquet"):
        p.write_bytes(b"not parquet")
    c = ReportCache(d, keep_last=3, retention_s=7 * 86400.0)
    attempts, _ = c.frames(hand_ledger)
    assert c.stats.mode == "full"
    assert len(attempts) == 4
    both(hand_ledger)
