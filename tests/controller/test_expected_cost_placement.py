"""The controller's side of `expected-cost`: picked by `launcher: recovery: expected-cost`, its
multi-zone twin when the plan offers spot in several zones, and each zone's prior from its band."""

from __future__ import annotations

from launcher.controller.placement import PlacementDriver, band_prior_up_hours, placement_for
from launcher.policies.recovery import get_recovery_policy
from pricing.models import Offer, ScoredOffer
from pricing.risk import BAND_HAZARD_PER_HOUR, CLOUD_DEFAULTS


def scored(zone: str, spot: bool, hazard: float, rank: int) -> ScoredOffer:
    o = Offer(cloud="aws", region="r", zone=zone, instance_type="g.xl", accelerator="T4", accelerator_count=1,
              vcpus=4, memory_gib=16, gpu_memory_gib=16, spot=spot, price_usd_per_hour=1.0 if spot else 3.0,
              on_demand_price_usd_per_hour=3.0)  # fmt: skip
    return ScoredOffer(o, rank, hazard, "x", None, 1.0, o.price_usd_per_hour)


def test_recovery_expected_cost_picks_the_model_policies_with_band_priors():
    calm, busy = BAND_HAZARD_PER_HOUR[0], BAND_HAZARD_PER_HOUR[-1]
    ranked = (scored("a", True, busy, 1), scored("b", True, calm, 2), scored("a", False, 0.0, 3))
    rec = get_recovery_policy("expected-cost")
    pol = placement_for(rec, ranked, has_deadline=True)
    assert pol.name == "expected-cost-multi-zone" and pol.band_priors
    one = placement_for(rec, ranked[:1] + ranked[2:], has_deadline=True)
    assert one.name == "expected-cost" and not one.multi_zone
    assert placement_for(get_recovery_policy("deadline-aware"), ranked, has_deadline=True).name == "multi-zone"
    assert placement_for(rec, ranked, has_deadline=False) is None

    PlacementDriver(pol, ranked, work_hours=2.0, deadline_hours=4.0, restart_overhead_s=60.0, tick_s=60.0,
                    capacity=lambda o: True)  # fmt: skip
    # The calmer band's zone starts from a longer expected spell; both within the documented range.
    assert pol._model(1).prior_up_hours > pol._model(0).prior_up_hours
    assert band_prior_up_hours(ranked[1]) == 4.0 * 1.0 or band_prior_up_hours(ranked[1]) > 1.0
    assert band_prior_up_hours(scored("c", True, CLOUD_DEFAULTS["aws"], 1)) == 1.0
    pol.reset()  # priors from the catalog outlive a reset (they are not run state)
    assert pol._model(1).prior_up_hours > pol._model(0).prior_up_hours


def test_recovery_markov_dp_plans_on_every_spot_zone_with_its_band_prior():
    calm = BAND_HAZARD_PER_HOUR[0]
    ranked = (scored("b", True, calm, 1), scored("a", True, BAND_HAZARD_PER_HOUR[-1], 2), scored("a", False, 0.0, 3))
    rec = get_recovery_policy("markov-dp")
    pol = placement_for(rec, ranked, has_deadline=True)
    assert pol.name == "markov-dp-multi-zone" and pol.band_priors and pol.multi_zone
    PlacementDriver(pol, ranked, work_hours=2.0, deadline_hours=4.0, restart_overhead_s=60.0, tick_s=60.0,
                    capacity=lambda o: True)  # fmt: skip
    assert pol._zone_priors[0] == band_prior_up_hours(ranked[0]) > 1.0
    assert pol._zone_priors[1] == band_prior_up_hours(ranked[1]) < 1.0
    one = placement_for(rec, ranked[:1] + ranked[2:], has_deadline=True)
    assert one.name == "markov-dp" and not one.multi_zone
