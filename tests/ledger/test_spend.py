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
