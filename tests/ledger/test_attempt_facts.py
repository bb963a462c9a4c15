"""attempt_facts: written when an attempt ends and rewritten by its late events; revision
0003_attempt_facts fills it for a ledger written before it existed, with the same rows."""

from __future__ import annotations

from alembic import command
from sqlalchemy import select

from launcher.ledger import Ledger
from launcher.ledger import models as m
from launcher.ledger.engine import alembic_config, make_engine
from tests.report.conftest import NOW, Clock, build_hand_ledger


def _facts(url: str) -> dict[str, tuple]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(m.attempt_facts)).all()
    finally:
        engine.dispose()
    return {r.attempt_id: tuple(r)[1:] for r in rows}


def test_facts_follow_the_attempts_events(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    led, _ = build_hand_ledger(url)
    led.close()
    facts = _facts(url)
    # ended attempts only (r-vision-2's attempt is open); a2's teardown came after its end
    assert set(facts) == {"r-vision-1-a1", "r-vision-1-a2", "r-nlp-1-a1"}
    teardown, last_ckpt, resume, overhead, n_price = facts["r-vision-1-a2"]
    assert (teardown.hour, teardown.minute) == (4, 30) and (last_ckpt.hour, resume.hour, resume.minute) == (3, 2, 15)
    assert overhead is None and n_price == 0
    assert facts["r-nlp-1-a1"] == (None, None, None, None, 0)  # no events: a row of nothing
    with Ledger(url, now=Clock(NOW)) as led:
        (a,) = led.open_attempts(run_id="r-vision-2")
        led.add_event("r-vision-2", "checkpoint", {"size_bytes": 1}, attempt_id=a.attempt_id, at=NOW)
        assert a.attempt_id not in _facts(url)  # still open: readers look its events up
        led.end_attempt(a.attempt_id, "completed", ended_at=NOW)
        led.add_event("r-vision-2", "price", {"price_usd_per_hour": 9.0}, attempt_id=a.attempt_id, at=NOW)
    assert _facts(url)[a.attempt_id][1] is not None and _facts(url)[a.attempt_id][4] == 1


def test_migration_fills_facts_of_an_existing_ledger(tmp_path):
    from launcher.report import ReportQuery, build_report

    url = f"sqlite:///{tmp_path / 'l.db'}"
    led, _ = build_hand_ledger(url)
    led.close()
    written = _facts(url)
    with Ledger(url, now=Clock(NOW)) as led:
        before = build_report(led, ReportQuery(by=("attempt",)), now=NOW).frame
    engine = make_engine(url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0002")
    engine.dispose()
    with Ledger(url, now=Clock(NOW)) as led:  # opening it upgrades to head, filling the facts
        after = build_report(led, ReportQuery(by=("attempt",)), now=NOW).frame
    assert _facts(url) == written
    import pandas as pd

    pd.testing.assert_frame_equal(before, after)
