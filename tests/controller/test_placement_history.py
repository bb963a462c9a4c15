"""What earlier runs saw of each zone's spot capacity reaches a new run's placement policy: read from
the ledger (a real SQLite ledger here; the query is plain SQLAlchemy), summed per zone, capped, and
used as spells seen before the run; the outages a run saw become events for the runs after it."""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta

import pytest

from launcher.controller.outage_watch import OUTAGE_EVENT, OutageWatch
from launcher.controller.placement import Held, PlacementDriver
from launcher.controller.placement_history import MAX_SEED_SPELLS, ZoneHistory, zone_history
from launcher.ledger import Ledger, RunRecord
from launcher.ledger.records import NewAttempt
from launcher.policies.base import Choice
from launcher.policies.registry import get_placement_policy
from launcher.policies.spells import SpellTracker
from pricing.models import Offer, ScoredOffer

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def offer(region: str, zone: str | None = None, *, spot: bool = True, cloud: str = "aws", price: float = 1.0) -> Offer:
    return Offer(cloud=cloud, region=region, zone=zone, instance_type="p3.2xlarge", accelerator="V100", accelerator_count=1,
                 vcpus=8, memory_gib=61, gpu_memory_gib=16, spot=spot, price_usd_per_hour=price,
                 on_demand_price_usd_per_hour=3.0)  # fmt: skip


def add(led: Ledger, run_id: str, o: Offer, minutes: float, reason: str, at: datetime = T0) -> None:
    a = led.add_attempt(run_id, NewAttempt.from_offer(o), started_at=at)
    led.end_attempt(a.attempt_id, reason, ended_at=at + timedelta(minutes=minutes))


@pytest.fixture
def led(launcher_home):
    with Ledger() as ledger:
        for r in ("old", "new"):
            ledger.create_run(RunRecord(run_id=r, name=r, spec_hash="h", spec_yaml="run: x", project="p"))
        yield ledger


def test_history_sums_other_runs_spot_spells_per_zone(led):
    east, west, local = offer("us-east-1", "us-east-1a"), offer("us-west-2", "us-west-2a"), offer("local", cloud="local")
    add(led, "old", east, 6, "preempted")
    add(led, "old", east, 9, "preempted", T0 + timedelta(hours=1))
    add(led, "old", east, 30, "completed", T0 + timedelta(hours=2))  # a spell still running when the job ended
    add(led, "old", east, 1, "provision_failed", T0 + timedelta(hours=3))  # held nothing
    add(led, "old", east, 600, "abandoned", T0 + timedelta(hours=4))  # closed by crash cleanup: not a spell
    add(led, "old", offer("us-east-1", "us-east-1a", spot=False), 60, "completed")  # on-demand: no spot evidence
    add(led, "old", local, 60, "preempted")  # simulated capacity: no history
    add(led, "new", west, 60, "preempted")  # this run's own attempts are the run's, not history
    attempts = led.ended_spot_attempts(since=T0 - timedelta(days=1))
    assert {a.spot for a in attempts} == {True} and len(attempts) == 7
    assert led.ended_spot_attempts(since=T0 + timedelta(hours=5)) == [a for a in attempts if a.ended_at >= T0 + timedelta(hours=5)]
    h = zone_history(attempts, [east, west, local, offer("us-east-1", "us-east-1a", spot=False)], exclude_run="new")
    assert list(h) == [east] and astuple(h[east]) == pytest.approx((45 / 60, 2, 0.0, 0))


def test_history_is_capped_at_a_few_spells_keeping_their_mean(led):
    east = offer("us-east-1", "us-east-1a")
    for i in range(20):
        add(led, "old", east, 3, "preempted", T0 + timedelta(minutes=10 * i))
    (h,) = zone_history(led.ended_spot_attempts(since=T0), [east], exclude_run="new").values()
    assert h.preemptions == MAX_SEED_SPELLS and h.up_hours == pytest.approx(MAX_SEED_SPELLS * 3 / 60)


def test_seeded_spells_by_hand():
    s = SpellTracker(prior_up_hours=1.0, prior_down_hours=2.0, prior_weight=0.5)
    s.seed(0, ZoneHistory(up_hours=0.25, preemptions=5))
    assert s.mean_up(0) == pytest.approx((0.5 * 1.0 + 0.25) / 5.5)  # before anything is observed
    for t in (0.0, 0.1, 0.2, 0.3, 0.4):  # seen every few minutes, as the controller sees every tick
        s.observe(t, (True, True))
    s.observe(0.5, (False, True))  # zone 0: a 0.5 h spell ended; zone 1 up 0.5 h, unseeded
    assert s.mean_up(0) == pytest.approx((0.5 + 0.25 + 0.5) / 6.5)
    assert s.mean_up(1) == pytest.approx((0.5 + 0.5) / 0.5)
    assert s.mean_down(0) == pytest.approx(2.0)  # this history speaks of up spells only
    s.seed(1, ZoneHistory(0.0, 0, down_hours=30.0, recoveries=2))  # two outages seen end, 30 h down in all
    assert s.mean_down(1) == pytest.approx((0.5 * 2.0 + 30.0) / 2.5)
    for bad in ((-1.0, 0), (0.0, -1), (0.0, 0, -1.0), (0.0, 0, 0.0, -1), (float("nan"), 0), (0.0, 0, float("inf"))):
        with pytest.raises(ValueError):
            ZoneHistory(*bad)


def so(o: Offer, rank: int) -> ScoredOffer:
    return ScoredOffer(o, rank, 0.05, "<5%", None, 10.0, o.price_usd_per_hour * 10)


def test_a_zone_known_to_reclaim_within_minutes_is_not_worth_leaving_on_demand_for():
    east, od = so(offer("us-east-1", "us-east-1a"), 1), so(offer("us-east-1", spot=False, price=3.0), 2)

    def decide(history):
        d = PlacementDriver(get_placement_policy("deadline-aware"), (east, od), work_hours=10, deadline_hours=20,
                            restart_overhead_s=300, tick_s=60, capacity=lambda o: True, history=history)  # fmt: skip
        st = d.state(elapsed_s=0, work_done_s=0, held=Held(Choice.ON_DEMAND), overhead_left_s=0, preemptions=0,
                     capacity=d.capacity())  # fmt: skip
        return d.decide(st)

    assert decide(None).choice is Choice.SPOT  # the prior's 1 h spells repay a hop of 5 min restarts
    known = decide({east.offer: ZoneHistory(up_hours=5 * 4 / 60, preemptions=5)})  # five 4-minute spells
    assert known.choice is Choice.ON_DEMAND and "a move would not pay" in known.reason


def test_multi_zone_hops_to_the_zone_whose_history_is_longest():
    a, b = so(offer("us-east-1", "us-east-1a"), 1), so(offer("us-west-2", "us-west-2a"), 2)
    od = so(offer("us-east-1", spot=False, price=3.0), 3)
    d = PlacementDriver(get_placement_policy("multi-zone"), (a, b, od), work_hours=10, deadline_hours=20,
                        restart_overhead_s=300, tick_s=60, capacity=lambda o: True,
                        history={a.offer: ZoneHistory(0.3, 5), b.offer: ZoneHistory(20.0, 1)})  # fmt: skip
    st = d.state(elapsed_s=0, work_done_s=0, held=Held(Choice.ON_DEMAND), overhead_left_s=0, preemptions=0,
                 capacity=d.capacity())  # fmt: skip
    dec = d.decide(st)
    assert dec.choice is Choice.SPOT and d.offer_for(dec) is b


def outage(led: Ledger, run_id: str, o: Offer, hours, ended, at: datetime = T0) -> None:
    led.add_event(run_id, OUTAGE_EVENT, {"cloud": o.cloud, "region": o.region, "zone": o.zone,
                                         "instance_type": o.instance_type, "down_hours": hours, "ended": ended}, at=at)  # fmt: skip


def test_outages_other_runs_saw_are_the_zone_s_down_spells(led):
    east, west = offer("us-east-1", "us-east-1a"), offer("us-west-2", "us-west-2a")
    add(led, "old", east, 60, "preempted")
    outage(led, "old", east, 2.0, True, T0 + timedelta(hours=1))
    outage(led, "old", east, 4.0, True, T0 + timedelta(hours=5))
    outage(led, "old", east, 10.0, False, T0 + timedelta(hours=15))  # the run ended first: time, no end
    for bad in ("a lot", float("nan"), True, -1.0):  # not a length of time: not evidence
        outage(led, "old", east, bad, True)
    outage(led, "old", offer("local", cloud="local"), 5.0, True)  # simulated capacity: no history
    outage(led, "new", east, 50.0, True)  # this run's own
    outage(led, "old", west, 1.0, True, T0 - timedelta(days=2))  # before the window
    seen = led.recent_events(OUTAGE_EVENT, since=T0 - timedelta(hours=1))
    assert [e.at for e in seen] == sorted((e.at for e in seen), reverse=True) and len(seen) == 9
    h = zone_history(led.ended_spot_attempts(since=T0), [east, west], exclude_run="new", outages=seen)
    assert list(h) == [east] and astuple(h[east]) == pytest.approx((1.0, 1, 16.0, 2))
    only_outages = zone_history([], [east], exclude_run="new", outages=seen)  # a zone the team only waited for
    assert astuple(only_outages[east]) == pytest.approx((0.0, 0, 16.0, 2))


def test_outage_history_is_capped_like_the_up_spells():
    h = ZoneHistory(0.0, 0, 40 * 0.5, 40).capped(MAX_SEED_SPELLS, 100.0)
    assert h.recoveries == MAX_SEED_SPELLS and h.down_hours == pytest.approx(MAX_SEED_SPELLS * 0.5)
    assert ZoneHistory(500.0, 1, 500.0, 1).capped(MAX_SEED_SPELLS, 168.0) == ZoneHistory(168.0, 1, 168.0, 1)


def test_the_outage_watch_by_hand():
    east, west = offer("us-east-1", "us-east-1a"), offer("us-west-2", "us-west-2a")
    w = OutageWatch()
    w.observe(east, True, 0.0)
    w.observe(east, False, 60.0)  # down from here
    w.observe(west, False, 90.0)  # seen down once only, never again: no time seen, dropped at the end
    w.observe(east, False, 600.0)
    assert w.take() == []
    w.observe(east, True, 60.0 + 2 * 3600)  # back after two hours
    (ended,) = w.take()
    assert ended["down_hours"] == pytest.approx(2.0) and ended["ended"] is True and ended["zone"] == "us-east-1a"
    assert w.take() == []
    w.observe(east, False, 8000.0)
    w.observe(east, False, 8000.0 + 1800)
    (left_open,) = w.close()
    assert left_open["down_hours"] == pytest.approx(0.5) and left_open["ended"] is False
    assert w.close() == []


def test_the_driver_s_capacity_feeds_the_outage_watch():
    east, od = so(offer("us-east-1", "us-east-1a"), 1), so(offer("us-east-1", spot=False, price=3.0), 2)
    now, up = [0.0], [True]
    d = PlacementDriver(get_placement_policy("markov-dp"), (east, od), work_hours=10, deadline_hours=20,
                        restart_overhead_s=300, tick_s=60, capacity=lambda o: up[0], clock=lambda: now[0])  # fmt: skip
    for t, u in ((0, True), (60, False), (120, False), (3660, True), (3720, False), (5520, False)):
        now[0], up[0] = float(t), u
        d.capacity()
    (ended,) = d.outages.take()
    assert ended["down_hours"] == pytest.approx(1.0) and ended["ended"] is True
    (left_open,) = d.outages.close()
    assert left_open["down_hours"] == pytest.approx(0.5) and left_open["ended"] is False
