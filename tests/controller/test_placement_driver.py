"""PlacementDriver: the plan's offers as the policy's zones, what counts as a move, and which runs get it."""

from __future__ import annotations

from launcher.controller.placement import Held, PlacementDriver, placement_for
from launcher.policies.base import Choice, Decision
from launcher.policies.recovery import get_recovery_policy
from launcher.policies.registry import get_placement_policy
from pricing.models import Offer, ScoredOffer


def so(rank: int, region: str, zone: str | None, spot: bool, price: float) -> ScoredOffer:
    o = Offer(cloud="aws", region=region, zone=zone, instance_type="p3.2xlarge", accelerator="V100",
              accelerator_count=1, vcpus=8, memory_gib=61, gpu_memory_gib=16, spot=spot,
              price_usd_per_hour=price, on_demand_price_usd_per_hour=3.06)  # fmt: skip
    return ScoredOffer(o, rank, 0.05, "<5%", None, 10.0, price * 10)


A = so(1, "us-east-1", "us-east-1a", True, 0.9)
B = so(2, "us-west-2", "us-west-2a", True, 1.0)
OD_DEAR = so(3, "us-east-1", None, False, 3.06)
OD_CHEAP = so(4, "us-west-2", None, False, 2.9)
RANKED = (A, B, OD_DEAR, OD_CHEAP)


def driver(policy: str, answers: dict) -> PlacementDriver:
    return PlacementDriver(get_placement_policy(policy), RANKED, work_hours=10, deadline_hours=20,
                           restart_overhead_s=720, tick_s=60, capacity=lambda o: answers.get(o.region))  # fmt: skip


def test_zones_are_spot_offers_in_rank_order_and_on_demand_is_the_cheapest():
    d = driver("multi-zone", {})
    assert d.zones == (A, B) and d.on_demand is OD_CHEAP
    assert driver("deadline-aware", {}).zones == (A,)  # one zone: the best ranked spot offer
    assert d.offer_for(Decision(Choice.SPOT, 1)) is B and d.offer_for(Decision(Choice.ON_DEMAND)) is OD_CHEAP
    assert d.offer_for(Decision(Choice.NONE)) is None


def test_capacity_unknown_counts_as_available_and_errors_do_not_stop_the_run():
    assert driver("multi-zone", {"us-east-1": False}).capacity() == (False, True)

    def broken(o):
        raise RuntimeError("API down")

    d = PlacementDriver(get_placement_policy("multi-zone"), RANKED, work_hours=10, deadline_hours=20,
                        restart_overhead_s=720, tick_s=60, capacity=broken)  # fmt: skip
    assert d.capacity() == (True, True)


def test_moves():
    d = driver("multi-zone", {})
    assert d.held(B) == Held(Choice.SPOT, 1) and d.held(OD_CHEAP) == Held(Choice.ON_DEMAND, 1)  # keeps the last zone
    assert not d.is_move(Decision(Choice.SPOT, 1), Held(Choice.SPOT, 1))
    assert d.is_move(Decision(Choice.SPOT, 0), Held(Choice.SPOT, 1))  # zone move
    assert d.is_move(Decision(Choice.SPOT, 0), Held(Choice.ON_DEMAND, 0))  # back to spot
    assert not d.is_move(Decision(Choice.ON_DEMAND, 1), Held(Choice.ON_DEMAND, 0))


def test_which_runs_consult_a_placement_policy():
    da = get_recovery_policy("deadline-aware")
    assert placement_for(da, RANKED, has_deadline=True).name == "multi-zone"
    assert placement_for(da, (A, OD_CHEAP), has_deadline=True).name == "deadline-aware"
    assert placement_for(da, RANKED, has_deadline=False) is None
    assert placement_for(get_recovery_policy("next-offer"), RANKED, has_deadline=True) is None


def test_events_only_on_a_changed_decision_and_carry_the_slack():
    d = driver("deadline-aware", {"us-east-1": False})
    st = d.state(elapsed_s=0, work_done_s=0, held=Held(Choice.NONE), overhead_left_s=0, preemptions=0,
                 capacity=d.capacity())  # fmt: skip
    dec = d.decide(st)
    first = d.event(dec, st)
    assert first["decision"] == "none" and first["slack_hours"] == 10.0 and "wait" in first["reason"]
    assert d.event(dec, st) is None


def test_work_past_the_estimate_is_never_done():
    # The job ran longer than expected_hours (the controller measures run-phase time): the policy
    # must not see the work as done and stop holding, or the run would wait forever.
    d = driver("deadline-aware", {})
    st = d.state(elapsed_s=3600 * 12, work_done_s=3600 * 11, held=Held(Choice.NONE), overhead_left_s=0,
                 preemptions=3, capacity=d.capacity())  # fmt: skip
    assert st.work_total_hours > st.work_done_hours
    dec = d.decide(st)
    assert dec.choice is Choice.SPOT and dec.reason != "done"


def test_zones_the_cloud_scores_unlikely_go_last_and_events_carry_the_score():
    C = so(5, "eu-west-1", "eu-west-1a", True, 1.2)
    ranked = (A, B, C, OD_CHEAP)

    def with_scores(policy: str, *pairs: tuple[ScoredOffer, int]) -> PlacementDriver:
        return PlacementDriver(get_placement_policy(policy), ranked, work_hours=10, deadline_hours=20,
                               restart_overhead_s=720, tick_s=60, capacity=lambda o: None,
                               placement_scores={s.offer: v for s, v in pairs})  # fmt: skip

    # A scored 2 ("not likely"): after the others, which keep their rank order; unscored counts as fine.
    assert with_scores("multi-zone", (A, 2), (B, 7)).zones == (B, C, A)
    assert with_scores("multi-zone", (A, 4), (B, 10)).zones == (A, B, C)  # above the low band: rank decides
    assert with_scores("multi-zone", (A, 3), (B, 1), (C, 3)).zones == (A, B, C)  # all low: rank order again
    single = with_scores("deadline-aware", (A, 1))
    assert single.zones == (B,)  # one zone: the best ranked spot offer the cloud does not score low
    st = single.state(elapsed_s=0, work_done_s=0, held=Held(Choice.NONE), overhead_left_s=0, preemptions=0,
                      capacity=single.capacity())  # fmt: skip
    dec = single.decide(st)
    assert dec.choice is Choice.SPOT and single.offer_for(dec) is B
    assert "placement_score" not in single.event(dec, st)["offer"]  # B was not scored
    scored_b = with_scores("deadline-aware", (A, 1), (B, 8))
    st = scored_b.state(elapsed_s=0, work_done_s=0, held=Held(Choice.NONE), overhead_left_s=0, preemptions=0,
                        capacity=scored_b.capacity())  # fmt: skip
    assert scored_b.event(scored_b.decide(st), st)["offer"]["placement_score"] == 8
