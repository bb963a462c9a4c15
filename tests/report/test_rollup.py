"""The cost rollup (launcher/ledger/rollup.py, plain Python, written by the ledger as runs end)
gives the same grouped reports as reading every attempt (launcher/ledger/attempt_cost.py,
vectorized): the cost rules of launcher/cost/attempts.py run one attempt at a time on
launcher.cost.scalar_xp and on numpy arrays, each with its own bucketing and sums (SQL, pandas),
checked against each other on random ledgers that cross midnights and a month boundary, with
preemptions, price changes, late events on ended runs, open attempts, re-opened runs and windows
that cut runs in two. Also:
the rollup is really what the report reads, the bulk backfill (run when an older ledger is
upgraded) writes the same rows as the ledger's own writes, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from sqlalchemy import delete, select, update

from launcher.report import ReportQuery, build_report, parse_window
from launcher.report.rollup_report import build_grouped_report, rollup_applies

T0 = datetime(2026, 10, 27, 0, 0, tzinfo=UTC)  # runs cross 2026-11-01 00:00
NOW = T0 + timedelta(days=9, hours=7)
GB = 1_000_000_000
BYS = ("experiment", "project", "owner", "cost-center", "cloud", "region", "run", "project,month", "cloud,region,month", "experiment,owner")
WINDOWS = (
    (None, None, None),
    ("2026-10-29", None, None),
    (None, "2026-11-02", None),
    (None, None, "2026-11"),
    ("2026-10-28T06:30:00", "2026-11-03T13:00:00", None),
    ("2026-11-01", "2026-12-31", None),
)


class Clock:
    def __init__(self, t: datetime) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


def build_random_ledger(url: str, seed: int, n_runs: int = 24):
    """Runs over nine days; attempts of 0-30 h on two clouds and the local backend, spot and
    on-demand, 1-2 nodes; preemptions with and without a checkpoint; recovery events with and
    without restart_overhead_seconds; explicit billed seconds; teardowns and checkpoints after
    the run ended; price changes; zero-length attempts; runs still running; a run re-opened."""
    from launcher.ledger import Ledger, NewAttempt, RunRecord

    rng = random.Random(seed)
    clock = Clock(T0)
    led = Ledger(url, now=clock)
    places = [("aws", "us-east-1"), ("aws", "us-west-2"), ("gcp", "us-central1"), ("local", "local")]
    for i in range(n_runs):
        run_id = f"r-{seed}-{i:02d}"
        t = T0 + timedelta(hours=rng.uniform(0, 24 * 7))
        clock.t = t
        led.create_run(
            RunRecord(run_id=run_id, name=run_id, spec_hash="0" * 64, spec_yaml="run: x",
                      project=rng.choice(["vision", "nlp", "rl"]), experiment=rng.choice(["e1", "e2", "e3", None]),
                      owner=rng.choice(["ann", "bob"]), cost_center=rng.choice(["cc-1", None]), created_at=t)
        )  # fmt: skip
        led.set_run_state(run_id, "running")
        n_att = rng.randint(1, 4)
        still_running = i % 7 == 3
        late_events = []
        for k in range(n_att):
            cloud, region = rng.choice(places)
            spot = rng.random() < 0.6
            od = rng.choice([1.0, 3.06, 12.24])
            price = round(od * rng.uniform(0.3, 0.5), 4) if spot else od
            att = led.add_attempt(
                run_id,
                NewAttempt(cloud=cloud, region=region, instance_type="g", accelerator_count=rng.choice([1, 4, 8]),
                           num_nodes=rng.choice([1, 1, 2]), spot=spot, price_usd_per_hour=price,
                           on_demand_price_usd_per_hour=od if rng.random() < 0.8 else None),
                started_at=t,
            )  # fmt: skip
            dur_h = 0.0 if rng.random() < 0.06 else rng.uniform(0.2, 30)
            if k > 0 and rng.random() < 0.8:
                data = {"restart_overhead_seconds": rng.uniform(30, 900)} if rng.random() < 0.5 else {}
                led.add_event(run_id, "recovery", data, attempt_id=att.attempt_id, at=t + timedelta(minutes=rng.uniform(1, 20)))
            for _ in range(rng.randint(0, 3)):
                size = rng.choice([2 * GB, 5 * GB, None])
                led.add_event(run_id, "checkpoint", {"size_bytes": size} if size else {}, attempt_id=att.attempt_id,
                              at=t + timedelta(hours=rng.uniform(0, max(dur_h, 0.01))))  # fmt: skip
            if spot and rng.random() < 0.3:
                led.add_event(run_id, "price", {"price_usd_per_hour": round(price * rng.uniform(0.8, 1.3), 4)},
                              attempt_id=att.attempt_id, at=t + timedelta(hours=rng.uniform(0, dur_h + 1)))  # fmt: skip
            end = t + timedelta(hours=dur_h)
            last = k == n_att - 1
            if last and still_running:
                break
            reason = "preempted" if (spot and not last) else rng.choice(["completed", "completed", "failed"])
            billed = rng.choice([None, None, dur_h * 3600 + rng.uniform(-600, 1800)])
            led.end_attempt(att.attempt_id, reason, ended_at=end, billed_seconds=None if billed is None else max(billed, 0))
            td = end + timedelta(minutes=rng.uniform(0, 40))
            if rng.random() < 0.5:
                led.add_event(run_id, "teardown", {}, attempt_id=att.attempt_id, at=td)
            elif rng.random() < 0.5:
                late_events.append((att.attempt_id, td))
            t = end + timedelta(minutes=rng.uniform(0, 30))
        if still_running:
            continue
        clock.t = t
        led.set_run_state(run_id, rng.choice(["succeeded", "failed"]), reason="done")
        for attempt_id, td in late_events:  # recorded after the run ended: its rollup is rewritten
            led.add_event(run_id, "teardown", {}, attempt_id=attempt_id, at=td)
        if rng.random() < 0.2:
            led.add_event(run_id, "checkpoint", {"size_bytes": 3 * GB}, attempt_id=None, at=t + timedelta(hours=1))
        if i % 11 == 5:  # re-opened, then ended again
            clock.t = t + timedelta(hours=2)
            led.set_run_state(run_id, "running")
            att = led.add_attempt(run_id, NewAttempt(cloud="aws", region="us-east-1", instance_type="g", price_usd_per_hour=2.0),
                                  started_at=clock.t)  # fmt: skip
            led.end_attempt(att.attempt_id, "completed", ended_at=clock.t + timedelta(hours=5))
            clock.t += timedelta(hours=5)
            led.set_run_state(run_id, "succeeded", reason="done")
    clock.t = NOW
    return led


def _compare(led, by: str, since, until, month, assumptions=None) -> pd.DataFrame:
    q = ReportQuery(by=tuple(by.split(",")), window=parse_window(since, until, month))
    if assumptions is not None:
        q = ReportQuery(by=q.by, window=q.window, assumptions=assumptions)
    assert rollup_applies(q)  # else the comparison below would compare build_report with itself
    direct = build_report(led, q, now=NOW).frame
    rolled = build_grouped_report(led, q, now=NOW).frame
    assert len(direct) > 0, (by, since, until, month)
    pd.testing.assert_frame_equal(direct, rolled, check_dtype=False, rtol=1e-9)
    assert round(rolled["BilledCost"].sum(), 2) == round(direct["BilledCost"].sum(), 2)
    return rolled


def _rollup_frame(led) -> pd.DataFrame:
    from launcher.ledger import models as m

    with led.engine.connect() as c:
        rows = c.execute(select(m.cost_rollup)).mappings().all()
    df = pd.DataFrame([dict(r) for r in rows])
    return df.sort_values(["run_id", "grain", "month_start_s", "cloud", "region"], na_position="first").reset_index(drop=True)


@pytest.fixture(scope="module")
def random_ledger(tmp_path_factory):
    from launcher.ledger import Ledger

    path = tmp_path_factory.mktemp("rollup") / "ledger.db"
    build_random_ledger(f"sqlite:///{path}", seed=11).close()
    led = Ledger(f"sqlite:///{path}", now=Clock(NOW))
    yield led
    led.close()


def test_rollup_reports_equal_reading_every_attempt(random_ledger):
    for by in BYS:
        for since, until, month in WINDOWS:
            _compare(random_ledger, by, since, until, month)


def test_rollup_reports_with_other_storage_prices(random_ledger):
    """Storage priced per cloud in the database from the rows' GB-hours (not the list-price USD)."""
    from launcher.ledger.attempt_cost import CostAssumptions

    prices = CostAssumptions(storage_usd_per_gb_month={"aws": 0.5, "gcp": 0.25}, default_storage_usd_per_gb_month=1.0)
    for by in ("experiment", "cloud,month", "run"):
        for since, until, month in WINDOWS[:3]:
            rolled = _compare(random_ledger, by, since, until, month, assumptions=prices)
            assert rolled["x_CheckpointStorageCost"].sum() > 0


def test_report_reads_the_rollup_rows(random_ledger, tmp_path):
    """Inflating the rolled-up compute changes the rollup report and not the direct one: the
    database's sums are what it reads for runs inside the window (the one-row-per-run grain for
    run-level keys, the month/cloud/region grain otherwise), and only for those."""
    import shutil

    from launcher.ledger import Ledger
    from launcher.ledger import models as m
    from launcher.ledger.rollup import GRAIN_RUN, GRAIN_SPLIT

    path = tmp_path / "copy.db"
    shutil.copy(random_ledger.url.removeprefix("sqlite:///"), path)
    with Ledger(f"sqlite:///{path}", now=Clock(NOW)) as led:
        queries = {by: ReportQuery(by=tuple(by.split(","))) for by in ("project", "cloud,month")}
        before = {by: build_grouped_report(led, q, now=NOW).frame["x_ComputeCost"].sum() for by, q in queries.items()}
        c = m.cost_rollup.c
        with led.engine.begin() as conn:
            inside = {
                grain: conn.execute(
                    select(c.run_id).where(c.grain == grain, c.run_first_s >= T0.timestamp(), c.run_last_s < NOW.timestamp())
                ).scalars().all()
                for grain in (GRAIN_RUN, GRAIN_SPLIT)
            }
            conn.execute(update(m.cost_rollup).values(compute_usd=c.compute_usd + 1000.0))
        assert len(inside[GRAIN_RUN]) >= 3, "few runs lie wholly inside the window: the test would prove little"
        after = {by: build_grouped_report(led, q, now=NOW).frame["x_ComputeCost"].sum() for by, q in queries.items()}
        direct = {by: build_report(led, q, now=NOW).frame["x_ComputeCost"].sum() for by, q in queries.items()}
    assert after["project"] - before["project"] == pytest.approx(1000.0 * len(inside[GRAIN_RUN]))
    assert after["cloud,month"] - before["cloud,month"] == pytest.approx(1000.0 * len(inside[GRAIN_SPLIT]))
    assert len(inside[GRAIN_SPLIT]) > len(inside[GRAIN_RUN])
    assert direct == pytest.approx(before)


def test_backfill_writes_what_the_ledger_writes(random_ledger, tmp_path):
    import shutil

    from launcher.ledger import Ledger
    from launcher.ledger import models as m
    from launcher.ledger.rollup import backfill

    written = _rollup_frame(random_ledger)
    assert len(written) > 20 and written["storage_gb_hours"].gt(0).any() and written["preemptions"].gt(0).any()
    path = tmp_path / "copy.db"
    shutil.copy(random_ledger.url.removeprefix("sqlite:///"), path)
    with Ledger(f"sqlite:///{path}", now=Clock(NOW)) as led:
        with led.engine.begin() as conn:
            conn.execute(delete(m.cost_rollup))
            conn.execute(delete(m.cost_rollup_runs))
            n = backfill(conn)
            assert backfill(conn) == 0  # idempotent: runs with a marker are skipped
        assert n == len(set(written["run_id"])) + _runs_without_rows(random_ledger)
        pd.testing.assert_frame_equal(_rollup_frame(led), written, check_dtype=False, rtol=1e-12)


def _runs_without_rows(led) -> int:
    from launcher.ledger import models as m

    with led.engine.connect() as c:
        return len(c.execute(select(m.cost_rollup_runs.c.run_id).where(m.cost_rollup_runs.c.first_s.is_(None))).all())


def test_upgrading_an_older_ledger_rolls_up_its_ended_runs(random_ledger, tmp_path):
    """A ledger at 0006 (before the rollup) gets its rows in the upgrade's transaction."""
    import shutil

    from alembic import command

    from launcher.ledger import Ledger
    from launcher.ledger.engine import alembic_config, make_engine

    written = _rollup_frame(random_ledger)
    path = tmp_path / "old.db"
    shutil.copy(random_ledger.url.removeprefix("sqlite:///"), path)
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0006_billing_account")
    engine.dispose()
    with Ledger(f"sqlite:///{path}", now=Clock(NOW)) as led:
        pd.testing.assert_frame_equal(_rollup_frame(led), written, check_dtype=False, rtol=1e-12)
        _compare(led, "experiment", None, None, None)


def test_reopened_and_running_runs_have_no_rows(random_ledger):
    from launcher.ledger import models as m

    with random_ledger.engine.connect() as c:
        r = m.runs.c
        running = set(c.execute(select(r.run_id).where(r.ended_at.is_(None))).scalars())
        rolled = set(c.execute(select(m.cost_rollup_runs.c.run_id)).scalars())
    assert running and not running & rolled
    assert len(rolled) == 24 - len(running)


def test_rollup_constants_match_the_report_defaults():
    from launcher.ledger.attempt_cost import CostAssumptions
    from launcher.ledger.rollup import ROLLUP_KEEP_LAST, ROLLUP_RETENTION_S

    a = CostAssumptions()
    assert (a.checkpoint_keep_last, a.checkpoint_retention_after_run_s) == (ROLLUP_KEEP_LAST, ROLLUP_RETENTION_S)


@pytest.mark.postgres
def test_rollup_reports_on_postgresql(pg_schema_url):
    led = build_random_ledger(pg_schema_url, seed=5, n_runs=16)
    try:
        for by in ("experiment", "cloud,region,month", "run"):
            for since, until, month in WINDOWS[:5]:
                _compare(led, by, since, until, month)
    finally:
        led.close()
