"""attempts.billing_account_id/name (migration 0006_billing_account): written with the attempt,
read back on SQLite and PostgreSQL; the migration down and up again keeps every attempt and
event (a batch table copy would have cascaded deletes to the events)."""

from __future__ import annotations

from alembic import command
from sqlalchemy import func, select

from launcher.ledger import Ledger, NewAttempt, RunRecord
from launcher.ledger import models as m
from launcher.ledger.engine import alembic_config, make_engine


def _seed(led: Ledger) -> str:
    led.create_run(RunRecord(run_id="r1", name="r1", spec_hash="0" * 64, spec_yaml="run: x", project="p"))
    a = led.add_attempt(
        "r1",
        NewAttempt(cloud="aws", region="us-east-1", instance_type="g5.xlarge", price_usd_per_hour=1.0,
                   billing_account_id="123456789012", billing_account_name="AWS account 123456789012"),
    )  # fmt: skip
    led.add_event("r1", "checkpoint", {"size_bytes": 10}, attempt_id=a.attempt_id)
    led.end_attempt(a.attempt_id, "completed")
    led.add_attempt("r1", NewAttempt(cloud="local", region="local", instance_type="local", price_usd_per_hour=0.0))
    return a.attempt_id


def test_recorded_with_the_attempt(ledger_url):
    with Ledger(ledger_url) as led:
        first = _seed(led)
        a1, a2 = led.attempts("r1")
    assert a1.attempt_id == first
    assert (a1.billing_account_id, a1.billing_account_name) == ("123456789012", "AWS account 123456789012")
    assert (a2.billing_account_id, a2.billing_account_name) == (None, None)


def _counts(url: str) -> tuple[int, int]:
    engine = make_engine(url)
    with engine.connect() as c:
        out = tuple(int(c.execute(select(func.count()).select_from(t)).scalar_one()) for t in (m.attempts, m.events))
    engine.dispose()
    return out  # type: ignore[return-value]


def test_down_and_up_keeps_attempts_and_events(ledger_url):
    with Ledger(ledger_url) as led:
        _seed(led)
    before = _counts(ledger_url)
    assert before[0] == 2 and before[1] >= 1
    engine = make_engine(ledger_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0005_leases")
    engine.dispose()
    with Ledger(ledger_url) as led:  # opening it upgrades to head again
        a1, _ = led.attempts("r1")
        assert a1.billing_account_id is None  # what was recorded went with the column
    assert _counts(ledger_url) == before
