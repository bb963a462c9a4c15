"""Spend queries (the cost definition itself is tested with the reports, tests/report)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from launcher.ledger import EndReason, Ledger
from tests.ledger.conftest import T0
from tests.ledger.helpers import gpu_attempt, make_run

H = timedelta(hours=1)


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


def test_free_runs_cost_nothing_but_a_price_change_or_one_paid_attempt_counts(ledger: Ledger, clock) -> None:
    # r-free: two $0/h attempts (the local backend); r-later: $0/h, then spot at $2/h from its 2nd hour;
    # r-mixed: a $0/h attempt and a paid one of 1 h at $1.5 x 2 nodes. Hand-computed expectations.
    for rid in ("r-free", "r-later", "r-mixed"):
        ledger.create_run(make_run(rid, project=rid))
    f1 = ledger.add_attempt("r-free", gpu_attempt(price_usd_per_hour=0.0, on_demand_price_usd_per_hour=None))
    later = ledger.add_attempt("r-later", gpu_attempt(price_usd_per_hour=0.0))
    m1 = ledger.add_attempt("r-mixed", gpu_attempt(price_usd_per_hour=0.0))
    clock.advance(hours=1)
    ledger.add_event("r-later", "price", {"price_usd_per_hour": 2.0}, attempt_id=later.attempt_id)
    ledger.end_attempt(f1.attempt_id, EndReason.PREEMPTED)
    ledger.end_attempt(m1.attempt_id, EndReason.PREEMPTED)
    f2 = ledger.add_attempt("r-free", gpu_attempt(price_usd_per_hour=0.0))
    m2 = ledger.add_attempt("r-mixed", gpu_attempt(num_nodes=2, price_usd_per_hour=1.5))
    clock.advance(hours=1)
    for a in (f2, m2, later):
        ledger.end_attempt(a.attempt_id, EndReason.COMPLETED)
    assert ledger.run_spend_usd("r-free") == 0.0
    assert ledger.attempt_costs_usd("r-free") == {f1.attempt_id: 0.0, f2.attempt_id: 0.0}
    assert ledger.run_spend_usd("r-later") == pytest.approx(2.0)
    assert ledger.attempt_costs_usd("r-later") == pytest.approx({later.attempt_id: 2.0})
    assert ledger.run_spend_usd("r-mixed") == pytest.approx(3.0)
    assert ledger.attempt_costs_usd("r-mixed") == pytest.approx({m1.attempt_id: 0.0, m2.attempt_id: 3.0})
    assert ledger.spend_usd() == pytest.approx(5.0)
    assert ledger.project_spend_usd("r-free", since=T0, until=T0 + 2 * H) == 0.0
