"""Budgets against the hand-built ledger: at the clock (T0+6h) project vision has spent
$12.00 of compute in 2026-11, counted as reports count it (2h x $2 + 2.5h to teardown x $2.40 +
open 1h x $2) and burns $2/h (the open attempt); nlp has spent $8.00."""

from __future__ import annotations

from datetime import timedelta

import pytest

from launcher.planning.budget import BudgetsConfig, budget_status, check_plan, load_budgets, remaining_usd, should_stop
from launcher.errors import BudgetExceededError, SpecError

from .conftest import NOW, h

CONFIG = BudgetsConfig.model_validate(
    {
        "budgets": [
            {"project": "vision", "monthly_limit_usd": 20, "hourly_burn_limit_usd_per_hour": 5},
            {"project": "vision", "owner": "alice", "monthly_limit_usd": 13.2},
        ]
    }
)


def test_remaining_is_the_tightest_matching_budget(hand_ledger):
    assert remaining_usd(hand_ledger, "vision", "alice", NOW, CONFIG) == pytest.approx(13.2 - 12.0)
    assert remaining_usd(hand_ledger, "vision", "bob", NOW, CONFIG) == pytest.approx(20 - 12.0)
    assert remaining_usd(hand_ledger, "nlp", "bob", NOW, CONFIG) is None


def test_plan_refused_when_expected_cost_exceeds_what_is_left(hand_ledger):
    check = check_plan(hand_ledger, "vision", "alice", expected_cost_usd=1.5, price_usd_per_hour=1.0, now=NOW, config=CONFIG)
    assert not check.ok
    assert check.remaining_usd == pytest.approx(1.2)
    assert check.budget == "vision/alice"
    assert "$1.20 left" in check.reason
    with pytest.raises(BudgetExceededError) as e:
        check.raise_if_refused()
    assert "$1.20 left this month" in e.value.hint
    ok = check_plan(hand_ledger, "vision", "alice", expected_cost_usd=1.0, price_usd_per_hour=1.0, now=NOW, config=CONFIG)
    assert ok.ok and ok.remaining_usd == pytest.approx(1.2)
    ok.raise_if_refused()


def test_plan_refused_over_the_burn_limit(hand_ledger):
    fine = check_plan(hand_ledger, "vision", "bob", expected_cost_usd=5, price_usd_per_hour=3.0, now=NOW, config=CONFIG)
    assert fine.ok and fine.burn_usd_per_hour == pytest.approx(2.0)
    hot = check_plan(hand_ledger, "vision", "bob", expected_cost_usd=5, price_usd_per_hour=3.5, now=NOW, config=CONFIG)
    assert not hot.ok
    assert "burn rate" in hot.reason and "$5.00/h" in hot.reason


def test_no_budget_means_ok(hand_ledger):
    check = check_plan(hand_ledger, "nlp", "bob", 1e6, 1e3, NOW, CONFIG)
    assert check.ok and check.remaining_usd is None
    assert check.summary() == "no budget applies"


def test_status(hand_ledger):
    st = {s.budget: s for s in budget_status(hand_ledger, NOW, CONFIG)}
    assert st["vision"].spent_usd == pytest.approx(12.0)
    assert st["vision"].state == "ok"
    assert st["vision/alice"].used_pct == pytest.approx(100 * 12.0 / 13.2)
    assert st["vision/alice"].state == "warning"
    assert st["vision/alice"].month == "2026-11"


def test_should_stop_on_monthly_limit_and_run_budget(hand_ledger):
    assert should_stop(hand_ledger, "r-vision-2", NOW, CONFIG) is None
    tight = BudgetsConfig.model_validate({"budgets": [{"project": "vision", "owner": "alice", "monthly_limit_usd": 10}]})
    reason = should_stop(hand_ledger, "r-vision-2", NOW, tight)
    assert reason is not None and "vision/alice" in reason
    soft = BudgetsConfig.model_validate(
        {"budgets": [{"project": "vision", "monthly_limit_usd": 10, "stop_runs_at_limit": False}]}
    )
    assert should_stop(hand_ledger, "r-vision-2", NOW, soft) is None
    # finished runs are never stopped
    assert should_stop(hand_ledger, "r-vision-1", NOW, tight) is None


def test_should_stop_on_the_runs_own_budget(hand_ledger):
    from launcher.ledger import NewAttempt, RunRecord

    hand_ledger.create_run(
        RunRecord(run_id="r-capped", name="capped", spec_hash="0" * 64, spec_yaml="run: x", project="nlp",
                  owner="bob", budget_usd=1.5, created_at=h(4))
    )  # fmt: skip
    hand_ledger.add_attempt(
        "r-capped", NewAttempt(cloud="aws", region="us-east-1", instance_type="g5.xlarge", price_usd_per_hour=1.0),
        started_at=NOW - timedelta(hours=2),
    )  # fmt: skip
    reason = should_stop(hand_ledger, "r-capped", NOW, BudgetsConfig())
    assert reason is not None and "$2.00 of its $1.50 budget" in reason


def test_budget_status_and_report_agree_to_the_cent(tmp_path):
    """The same window, the same money: a ledger with preemptions, a price change and an open
    attempt (tests/report/test_focus.py's), budget status against `launcher report`."""
    from launcher.ledger import Ledger
    from launcher.report import ReportQuery, build_report, parse_window

    from .conftest import Clock
    from .test_focus import build_focus_ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    build_focus_ledger(url).close()
    config = BudgetsConfig.model_validate(
        {"budgets": [{"project": p, "monthly_limit_usd": 100} for p in ("vision", "nlp", "tools")]}
    )
    with Ledger(url, now=Clock(NOW)) as led:
        spent = {s.project: s.spent_usd for s in budget_status(led, NOW, config)}
        q = ReportQuery(by=("project",), window=parse_window(since="2026-11-01", until=NOW.isoformat()))
        report = build_report(led, q, now=NOW).frame.set_index("x_ProjectId")["x_ComputeCost"]
        assert led.run_spend_usd("r-oct") == pytest.approx(10.0)  # $4 + $6 across the price change
    assert {p: round(v, 2) for p, v in spent.items()} == {p: round(report.get(p, 0.0), 2) for p in spent}
    # by hand: vision 12.00 (to teardown, the open attempt to the clock); nlp 8.00;
    # tools: r-oct's November part, at the changed price
    assert spent == pytest.approx({"vision": 12.0, "nlp": 8.0, "tools": 6.0})


def test_config_errors_name_the_field(tmp_path):
    p = tmp_path / "budgets.yaml"
    p.write_text("budgets:\n  - project: vision\n    monthly_limit: 100\n")
    with pytest.raises(SpecError) as e:
        load_budgets(p)
    assert "budgets.0.monthly_limit" in e.value.message
    assert "monthly_limit_usd" in (e.value.hint or "")
    p.write_text("budgets:\n  - project: vision\n")
    with pytest.raises(SpecError, match="monthly_limit_usd and/or"):
        load_budgets(p)
    p.write_text("budgets: [\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_budgets(p)
    p.write_text("budgets:\n  - {project: a, monthly_limit_usd: 1}\n  - {project: a, monthly_limit_usd: 2}\n")
    with pytest.raises(SpecError, match="listed twice"):
        load_budgets(p)
    assert load_budgets(tmp_path / "absent.yaml").budgets == []
