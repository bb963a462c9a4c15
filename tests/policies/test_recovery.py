"""Recovery policies: which offer the controller's next attempt gets."""

from __future__ import annotations

import pytest

from launcher.errors import UnknownNameError
from launcher.policies.base import Choice, DecisionState, RecoveryContext
from launcher.policies.recovery import default_recovery_policy, get_recovery_policy, names, offer_key
from pricing.models import Offer, ScoredOffer


def scored(rank: int, region: str, spot: bool, price: float, zone: str | None = None) -> ScoredOffer:
    offer = Offer(
        cloud="aws", region=region, zone=zone, instance_type="p3.2xlarge", accelerator="V100",
        accelerator_count=1, vcpus=8, memory_gib=61, gpu_memory_gib=16, spot=spot,
        price_usd_per_hour=price, on_demand_price_usd_per_hour=3.06,
    )
    return ScoredOffer(offer=offer, rank=rank, hazard_per_hour=0.05 if spot else 0.0,
                       interruption_band="<5%" if spot else "on-demand", checkpoint_minutes=30.0,
                       expected_hours=10.0, expected_cost_usd=price * 10)


A = scored(0, "us-east-1", True, 0.95, "us-east-1a")
B = scored(1, "us-east-1", True, 0.97, "us-east-1b")
C = scored(2, "us-west-2", True, 1.05, "us-west-2a")
OD_EAST = scored(3, "us-east-1", False, 3.06)
OD_WEST = scored(4, "us-west-2", False, 2.90)
RANKED = (A, B, C, OD_EAST, OD_WEST)


def state(slack_hours: float, spot_up: bool, work_left: float = 10.0, current=Choice.NONE) -> DecisionState:
    return DecisionState(
        elapsed_hours=0.0, work_done_hours=0.0, work_total_hours=work_left, deadline_hours=work_left + slack_hours,
        restart_overhead_hours=0.2, current=current, current_zone=0, spot_available=(spot_up,),
    )


def test_names_default_and_unknown():
    assert set(names()) == {"same-offer", "next-offer", "on-demand", "deadline-aware", "expected-cost",
                           "markov-dp"}
    assert default_recovery_policy(True) == "deadline-aware"
    assert default_recovery_policy(False) == "next-offer"
    with pytest.raises(UnknownNameError) as e:
        get_recovery_policy("next_offer")
    assert "next-offer" in (e.value.hint or "")


def test_same_offer_retries_the_previous_offer_when_its_capacity_is_back():
    pol = get_recovery_policy("same-offer")
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=None)).offer is A
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=B)).offer is B
    waiting = pol.choose(RecoveryContext(ranked=RANKED, previous=B, state=state(20, spot_up=False)))
    assert waiting.offer is None and waiting.wait_seconds > 0
    gone = pol.choose(RecoveryContext(ranked=(A, C), previous=B))
    assert gone.offer is None


def test_same_offer_matches_by_placement_not_price():
    repriced = scored(0, "us-east-1", True, 1.20, "us-east-1b")
    d = get_recovery_policy("same-offer").choose(RecoveryContext(ranked=(A, repriced), previous=B))
    assert d.offer is repriced and offer_key(repriced) == offer_key(B)


def test_next_offer_moves_down_the_ranking_and_wraps():
    pol = get_recovery_policy("next-offer")
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=None)).offer is A
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=A)).offer is B
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=OD_WEST)).offer is A


def test_next_offer_moves_away_from_a_region_that_keeps_preempting():
    pol = get_recovery_policy("next-offer")
    once = pol.choose(RecoveryContext(ranked=RANKED, previous=A, preempted_regions=("us-east-1",)))
    assert once.offer is B  # one preemption is not a pattern
    twice = pol.choose(RecoveryContext(ranked=RANKED, previous=B, preempted_regions=("us-east-1", "us-east-1")))
    assert twice.offer is C and "us-east-1" in twice.reason
    # After the west offers, the penalized region is still used rather than nothing.
    only_bad = pol.choose(RecoveryContext(ranked=(A, B), previous=A, preempted_regions=("us-east-1",) * 3))
    assert only_bad.offer is B


def test_on_demand_takes_the_cheapest_on_demand_offer_not_the_best_ranked():
    d = get_recovery_policy("on-demand").choose(RecoveryContext(ranked=RANKED, previous=A))
    assert d.offer is OD_WEST
    fallback = get_recovery_policy("on-demand").choose(RecoveryContext(ranked=(A, B), previous=A))
    assert fallback.offer is B and "no on-demand" in fallback.reason


def test_deadline_aware_adapter_spot_wait_or_on_demand():
    pol = get_recovery_policy("deadline-aware")
    spot = pol.choose(RecoveryContext(ranked=RANKED, previous=A, state=state(20, spot_up=True)))
    assert spot.offer is B  # spot, next in ranking after the preempted one
    wait = pol.choose(RecoveryContext(ranked=RANKED, previous=A, state=state(20, spot_up=False)))
    assert wait.offer is None and wait.wait_seconds == pytest.approx(360.0)
    # 1.5 h of slack < reserve max(0.4, 0.8 + 1.0): on-demand, best ranked of that kind.
    tight = pol.choose(RecoveryContext(ranked=RANKED, previous=A, state=state(1.5, spot_up=False)))
    assert tight.offer is OD_EAST
    # Too little slack for a spot start even though capacity is there.
    no_room = pol.choose(RecoveryContext(ranked=RANKED, previous=A, state=state(0.3, spot_up=True)))
    assert no_room.offer is OD_EAST
    # No state (no deadline known): behaves like next-offer.
    assert pol.choose(RecoveryContext(ranked=RANKED, previous=A)).offer is B


def test_deadline_aware_adapter_penalizes_regions_for_spot():
    pol = get_recovery_policy("deadline-aware")
    d = pol.choose(
        RecoveryContext(ranked=RANKED, previous=A, preempted_regions=("us-east-1",) * 2, state=state(20, True))
    )
    assert d.offer is C
