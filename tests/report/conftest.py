"""A small hand-built ledger (real SQLite Ledger API, injected clock) whose costs are worked
out by hand in HAND below; the report tests compare against those figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

T0 = datetime(2026, 11, 3, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=6)
GB = 1_000_000_000


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


class Clock:
    def __init__(self, t: datetime) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


def build_hand_ledger(url: str):
    """The scenario (times in hours after T0 = 2026-11-03 00:00 UTC, report clock T0+6h):

    r-vision-1 (project vision, experiment exp-a, owner alice, cost center cc-1)
      a1: aws spot, 2 nodes x $1.00/h (on-demand $3.00), 1 GPU/node, 0h..2h, preempted;
          checkpoints (10 GB) at 0.5h and 1.5h.
      a2: aws spot, 2 nodes x $1.20/h (on-demand $3.00), 2h..4h completed, running again at
          2.25h (recovery event), teardown event at 4.5h; checkpoint (10 GB) at 3h.
    r-nlp-1 (project nlp, experiment exp-b, owner bob, cost center cc-2)
      a1: gcp on-demand, 1 node x $4.00/h, 8 GPUs, -1h..1h, billed 7200 s, completed.
    r-vision-2 (project vision, experiment exp-c, owner alice, cost center cc-1)
      a1: aws on-demand, 1 node x $2.00/h, 4 GPUs, 5h.. still open at 6h.
    """
    from launcher.ledger import Ledger, NewAttempt, RunRecord

    clock = Clock(h(-2))
    led = Ledger(url, now=clock)

    def run(run_id, project, experiment, owner, cc, created):
        clock.t = created
        led.create_run(
            RunRecord(run_id=run_id, name=run_id, spec_hash="0" * 64, spec_yaml="run: true",
                      project=project, experiment=experiment, owner=owner, cost_center=cc,
                      created_at=created),
            tags={"team": project},
        )  # fmt: skip

    def set_state(run_id, state, at, reason=None):
        clock.t = at
        led.set_run_state(run_id, state, reason=reason)

    spot = dict(cloud="aws", region="us-east-1", zone="us-east-1a", instance_type="g5.xlarge",
                accelerator="A10G", accelerator_count=1, num_nodes=2, spot=True,
                on_demand_price_usd_per_hour=3.0, cluster="c-vision-1")  # fmt: skip
    run("r-vision-1", "vision", "exp-a", "alice", "cc-1", h(0))
    set_state("r-vision-1", "running", h(0))
    a1 = led.add_attempt("r-vision-1", NewAttempt(price_usd_per_hour=1.0, **spot), started_at=h(0))
    led.add_event("r-vision-1", "checkpoint", {"size_bytes": 10 * GB, "step": 100}, attempt_id=a1.attempt_id, at=h(0.5))
    led.add_event("r-vision-1", "checkpoint", {"size_bytes": 10 * GB, "step": 300}, attempt_id=a1.attempt_id, at=h(1.5))
    led.end_attempt(a1.attempt_id, "preempted", ended_at=h(2))
    led.add_event("r-vision-1", "preemption", {}, attempt_id=a1.attempt_id, at=h(2))
    set_state("r-vision-1", "recovering", h(2))
    a2 = led.add_attempt("r-vision-1", NewAttempt(price_usd_per_hour=1.2, **spot), started_at=h(2))
    set_state("r-vision-1", "running", h(2.25))
    led.add_event("r-vision-1", "recovery", {"from_step": 300}, attempt_id=a2.attempt_id, at=h(2.25))
    led.add_event("r-vision-1", "checkpoint", {"size_bytes": 10 * GB, "step": 500}, attempt_id=a2.attempt_id, at=h(3))
    led.end_attempt(a2.attempt_id, "completed", ended_at=h(4))
    led.add_event("r-vision-1", "teardown", {}, attempt_id=a2.attempt_id, at=h(4.5))
    set_state("r-vision-1", "succeeded", h(4.5), reason="completed")

    run("r-nlp-1", "nlp", "exp-b", "bob", "cc-2", h(-1))
    b1 = led.add_attempt(
        "r-nlp-1",
        NewAttempt(cloud="gcp", region="us-central1", instance_type="a2-highgpu-8g", accelerator="A100",
                   accelerator_count=8, num_nodes=1, spot=False, price_usd_per_hour=4.0,
                   on_demand_price_usd_per_hour=4.0),
        started_at=h(-1),
    )  # fmt: skip
    led.end_attempt(b1.attempt_id, "completed", ended_at=h(1), billed_seconds=7200)
    set_state("r-nlp-1", "succeeded", h(1), reason="completed")

    run("r-vision-2", "vision", "exp-c", "alice", "cc-1", h(5))
    led.add_attempt(
        "r-vision-2",
        NewAttempt(cloud="aws", region="us-west-2", instance_type="g5.12xlarge", accelerator="A10G",
                   accelerator_count=4, num_nodes=1, spot=False, price_usd_per_hour=2.0),
        started_at=h(5),
    )  # fmt: skip
    clock.t = NOW
    return led, clock


@pytest.fixture
def ledger_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(scope="session")
def hand_ledger_template(tmp_path_factory):
    """Built once (many small durable transactions are slow); each test gets a copy."""
    path = tmp_path_factory.mktemp("hand-ledger") / "ledger.db"
    led, _ = build_hand_ledger(f"sqlite:///{path}")
    led.close()
    return path


@pytest.fixture
def hand_ledger_path(hand_ledger_template, tmp_path):
    import shutil

    dst = tmp_path / "hand" / "ledger.db"
    dst.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):
        src = hand_ledger_template.with_name(hand_ledger_template.name + suffix)
        if src.exists():
            shutil.copy(src, dst.with_name(dst.name + suffix))
    return dst


@pytest.fixture
def hand_ledger(hand_ledger_path):
    from launcher.ledger import Ledger

    led = Ledger(f"sqlite:///{hand_ledger_path}", now=Clock(NOW))
    try:
        yield led
    finally:
        led.close()


@pytest.fixture
def pg_schema_url():
    """A PostgreSQL schema of the test's own on LAUNCHER_TEST_PG_URL (dropped afterwards)."""
    import os

    pg = os.environ.get("LAUNCHER_TEST_PG_URL")
    if not pg:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    from tests.ledger.conftest import _pg_schema_url

    yield from _pg_schema_url(pg)
