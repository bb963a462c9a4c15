"""Spend queries and the report frame."""

from __future__ import annotations

from datetime import timedelta

import pytest

from launcher.ledger import EndReason, Ledger
from launcher.ledger.spend import attempt_cost_in_window
from tests.ledger.conftest import T0
from tests.ledger.helpers import gpu_attempt, make_run

H = timedelta(hours=1)


def test_cost_in_window_pro_rata_and_open() -> None:
    now = T0 + 10 * H
    # closed 2 h attempt at $1.5/h x 2 nodes = $6; a window covering half of it -> $3
    args = (T0, T0 + 2 * H, None, 1.5, 2)
    assert attempt_cost_in_window(*args, now=now) == pytest.approx(6.0)
    assert attempt_cost_in_window(*args, now=now, since=T0 + H) == pytest.approx(3.0)
    assert attempt_cost_in_window(*args, now=now, until=T0 + 30 * timedelta(minutes=1)) == pytest.approx(1.5)
    assert attempt_cost_in_window(*args, now=now, since=T0 + 3 * H) == 0.0
    # billed seconds (e.g. rounded up per minute) scale the cost, not the elapsed time
    assert attempt_cost_in_window(T0, T0 + H, 7200.0, 1.0, 1, now=now) == pytest.approx(2.0)
    # open attempts count up to now
    assert attempt_cost_in_window(T0, None, None, 1.0, 1, now=now) == pytest.approx(10.0)
    # a zero-length attempt is either inside the window or not
    assert attempt_cost_in_window(T0, T0, 60.0, 60.0, 1, now=now, since=T0) == pytest.approx(1.0)
    assert attempt_cost_in_window(T0, T0, 60.0, 60.0, 1, now=now, until=T0) == 0.0


def _scenario(ledger: Ledger, clock) -> None:
    """vision/ada: 2 h at $0.5 x 2 nodes (preempted) then an open attempt at $1.0;
    nlp/bob: 1 h at $3.0 one month earlier."""
    ledger.create_run(make_run("r-v", project="vision", owner="ada", tags={"team": "cv"}))
    ledger.create_run(make_run("r-n", project="nlp", owner="bob", created_at=T0 - 30 * 24 * H))
    a = ledger.add_attempt("r-v", gpu_attempt(num_nodes=2, price_usd_per_hour=0.5))
    n = ledger.add_attempt("r-n", gpu_attempt(price_usd_per_hour=3.0, spot=False), started_at=T0 - 30 * 24 * H)
    ledger.end_attempt(n.attempt_id, EndReason.COMPLETED, ended_at=T0 - 30 * 24 * H + H)
    clock.advance(hours=2)
    ledger.end_attempt(a.attempt_id, EndReason.PREEMPTED)
    ledger.add_attempt("r-v", gpu_attempt(price_usd_per_hour=1.0, region="us-west-2"))
    clock.advance(hours=1)  # now = T0 + 3 h


def test_spend_by_project_owner_run_and_window(ledger: Ledger, clock) -> None:
    _scenario(ledger, clock)
    assert ledger.project_spend_usd("vision") == pytest.approx(2.0 + 1.0)
    assert ledger.owner_spend_usd("bob") == pytest.approx(3.0)
    assert ledger.run_spend_usd("r-v") == pytest.approx(3.0)
    assert ledger.spend_usd() == pytest.approx(6.0)
    assert ledger.project_spend_usd("vision", since=T0 + H) == pytest.approx(1.0 + 1.0)
    assert ledger.project_spend_usd("nlp", since=T0 - 7 * 24 * H) == 0.0
    assert ledger.project_spend_usd("vision", until=T0) == 0.0
    assert ledger.project_spend_usd("unknown") == 0.0
    assert ledger.burn_rate_usd_per_hour() == pytest.approx(1.0)
    assert ledger.burn_rate_usd_per_hour(project="nlp") == 0.0


def test_attempts_frame_columns_window_and_tags(ledger: Ledger, clock) -> None:
    _scenario(ledger, clock)
    frame = ledger.attempts_frame()
    assert len(frame) == 3 and frame.as_of == T0 + 3 * H
    assert set(frame.columns) == set(frame.COLUMNS)
    order = sorted(range(3), key=lambda i: frame.columns["started_at"][i])
    cols = {k: [v[i] for i in order] for k, v in frame.columns.items()}
    assert cols["attempt_id"] == ["r-n-a1", "r-v-a1", "r-v-a2"]
    assert cols["started_at"][1] == pytest.approx(T0.timestamp(), abs=1e-3)
    assert cols["ended_at"][1] == pytest.approx((T0 + 2 * H).timestamp(), abs=1e-3)
    assert cols["ended_at"][2] is None and cols["billed_seconds"][1] == 7200.0
    assert cols["project"] == ["nlp", "vision", "vision"] and cols["owner"][1] == "ada"
    assert cols["spot"] == [False, True, True] and cols["end_reason"][:2] == ["completed", "preempted"]
    assert cols["tags"][1] == {"team": "cv"} and cols["tags"][0] == {}
    assert cols["run_state"][1] == "pending" and cols["run_name"][1] == "train"
    window = ledger.attempts_frame(since=T0, until=T0 + 10 * H)
    assert sorted(window.columns["attempt_id"]) == ["r-v-a1", "r-v-a2"]
    assert len(ledger.attempts_frame(since=T0 + 100 * H)) == 1  # only the open attempt
    empty = ledger.attempts_frame(until=T0 - 365 * 24 * H)
    assert len(empty) == 0 and set(empty.columns) == set(empty.COLUMNS)
    import pandas as pd

    df = pd.DataFrame(cols)
    assert df.shape == (3, len(frame.COLUMNS))
    started = pd.to_datetime(df["started_at"], unit="s", utc=True)
    assert started.iloc[2] == pd.Timestamp(T0 + 2 * H)  # exact to the microsecond


def test_cost_rollup_matches_hand_arithmetic_and_spend(ledger: Ledger, clock) -> None:
    _scenario(ledger, clock)
    ledger.set_run_tags("r-n", {"team": "nlp"})
    by_project = {row.keys["project"]: row for row in ledger.cost_rollup(["project"])}
    v, n = by_project["vision"], by_project["nlp"]
    assert (v.attempts, v.preemptions) == (2, 1)
    assert v.billed_cost_usd == pytest.approx(3.0) == pytest.approx(ledger.project_spend_usd("vision"))
    assert v.list_cost_usd == pytest.approx(2 * 2 * 1.0 + 1 * 1.0)  # on-demand $1.0 for both
    assert v.savings_usd == pytest.approx(2.0) and v.spot_cost_usd == pytest.approx(3.0)
    assert v.node_hours == pytest.approx(5.0) and v.gpu_hours == pytest.approx(5.0)
    assert v.first_start == T0 and v.last_end == T0 + 3 * H  # open attempt counted up to now
    assert n.billed_cost_usd == pytest.approx(3.0) and n.spot_cost_usd == 0.0 and n.savings_usd == pytest.approx(-2.0)

    window = {r.keys["project"]: r for r in ledger.cost_rollup(["project"], since=T0 + H)}
    assert set(window) == {"vision"}
    assert window["vision"].billed_cost_usd == pytest.approx(ledger.project_spend_usd("vision", since=T0 + H))

    months = [(r.keys["month"], round(r.billed_cost_usd, 6)) for r in ledger.cost_rollup(["month"])]
    assert months == [("2026-10", 3.0), ("2026-11", 3.0)]
    days = ledger.cost_rollup(["day", "cloud", "spot"])
    assert [(r.keys["day"], r.keys["cloud"], r.keys["spot"]) for r in days] == [
        ("2026-10-02", "aws", False), ("2026-11-01", "aws", True),
    ]  # fmt: skip
    regions = {r.keys["region"]: r.attempts for r in ledger.cost_rollup(["region"])}
    assert regions == {"us-east-1": 2, "us-west-2": 1}
    teams = {r.keys["tag:team"]: r.billed_cost_usd for r in ledger.cost_rollup(["tag:team", "owner"])}
    assert teams == {"cv": pytest.approx(3.0), "nlp": pytest.approx(3.0)}


def test_cost_rollup_rejects_unknown_keys(ledger: Ledger) -> None:
    from launcher.errors import BadInputError, UnknownNameError

    with pytest.raises(UnknownNameError, match="projcet") as err:
        ledger.cost_rollup(["projcet"])
    assert "project" in (err.value.hint or "")
    with pytest.raises(BadInputError):
        ledger.cost_rollup([])
