"""Attempts: sequence numbers, state, compare-and-set end, billed time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from launcher.errors import ConflictError, NotFoundError
from launcher.ledger import AttemptState, EndReason, Ledger, NewAttempt
from pricing.models import Offer
from tests.ledger.conftest import T0
from tests.ledger.helpers import gpu_attempt, make_run


def test_attempts_number_per_run_and_copy_the_offer(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-a"))
    ledger.create_run(make_run("r-b"))
    offer = Offer(
        cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="g2-standard-4",
        accelerator="L4", accelerator_count=1, vcpus=4, memory_gib=16, gpu_memory_gib=24,
        spot=True, price_usd_per_hour=0.28, on_demand_price_usd_per_hour=0.71,
    )  # fmt: skip
    a1 = ledger.add_attempt("r-a", NewAttempt.from_offer(offer, num_nodes=2, cluster="c-a"))
    clock.advance(minutes=10)
    a2 = ledger.add_attempt("r-a", gpu_attempt())
    b1 = ledger.add_attempt("r-b", gpu_attempt(), state=AttemptState.SETUP)
    assert (a1.seq, a2.seq, b1.seq) == (1, 2, 1)
    assert a1.attempt_id == "r-a-a1" and a2.attempt_id == "r-a-a2"
    assert (a1.cloud, a1.zone, a1.instance_type, a1.accelerator, a1.num_nodes, a1.spot) == (
        "gcp", "us-central1-a", "g2-standard-4", "L4", 2, True,
    )  # fmt: skip
    assert a1.price_usd_per_hour == 0.28 and a1.on_demand_price_usd_per_hour == 0.71
    assert a1.cluster == "c-a" and a1.state == AttemptState.PROVISIONING and a1.is_open
    assert a1.started_at == T0 and a2.started_at == T0 + timedelta(minutes=10)
    assert b1.state == "setup"
    assert [a.attempt_id for a in ledger.attempts("r-a")] == ["r-a-a1", "r-a-a2"]
    assert ledger.get_attempt("r-b-a1") == b1


def test_add_attempt_to_unknown_run_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFoundError):
        ledger.add_attempt("r-ghost", gpu_attempt())


def test_end_attempt_defaults_billed_to_elapsed_and_wins_once(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-e"))
    a = ledger.add_attempt("r-e", gpu_attempt())
    ledger.set_attempt_state(a.attempt_id, AttemptState.RUNNING, cluster="c-e")
    clock.advance(minutes=90)
    ended = ledger.end_attempt(a.attempt_id, EndReason.PREEMPTED)
    assert ended.state == AttemptState.ENDED and ended.end_reason == "preempted"
    assert ended.ended_at == T0 + timedelta(minutes=90) and ended.billed_seconds == 5400.0
    assert ended.cluster == "c-e" and ended.exit_code is None
    assert ledger.attempt_costs_usd("r-e") == {a.attempt_id: pytest.approx(0.75)}
    with pytest.raises(ConflictError, match="preempted"):
        ledger.end_attempt(a.attempt_id, EndReason.COMPLETED)
    with pytest.raises(ConflictError):
        ledger.set_attempt_state(a.attempt_id, AttemptState.RUNNING)
    with pytest.raises(NotFoundError):
        ledger.end_attempt("r-e-a9", EndReason.COMPLETED)
    with pytest.raises(NotFoundError):
        ledger.set_attempt_state("r-e-a9", AttemptState.RUNNING)
    assert ledger.get_attempt(a.attempt_id).end_reason == "preempted"


def test_end_attempt_with_explicit_values(ledger: Ledger, clock) -> None:
    ledger.create_run(make_run("r-x"))
    a = ledger.add_attempt("r-x", gpu_attempt(), started_at=T0 - timedelta(hours=1))
    ended = ledger.end_attempt(
        a.attempt_id, EndReason.FAILED, exit_code=3, ended_at=T0 - timedelta(minutes=30), billed_seconds=1860
    )
    assert (ended.exit_code, ended.billed_seconds, ended.ended_at) == (3, 1860, T0 - timedelta(minutes=30))


def test_open_attempts_filters(ledger: Ledger) -> None:
    ledger.create_run(make_run("r-o"))
    ledger.create_run(make_run("r-p"))
    a = ledger.add_attempt("r-o", gpu_attempt(cluster="c1"))
    b = ledger.add_attempt("r-p", gpu_attempt(cluster="c2"))
    ledger.add_attempt("r-p", gpu_attempt(cluster="c2"))
    ledger.end_attempt(b.attempt_id, EndReason.NODE_LOST)
    assert [x.attempt_id for x in ledger.open_attempts()] == ["r-o-a1", "r-p-a2"]
    assert [x.attempt_id for x in ledger.open_attempts(cluster="c1")] == [a.attempt_id]
    assert [x.attempt_id for x in ledger.open_attempts(run_id="r-p")] == ["r-p-a2"]
