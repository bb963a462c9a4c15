"""Ranking math (hand-computed cases, a simulation of the model) and filter/sanity behaviour."""

import math
import random

import numpy as np
import pytest

from pricing.errors import NoOfferError, UnknownNameError
from pricing.errors import PricingInputError as BadInputError
from pricing.catalog import load_catalog
from pricing.models import GpuRequest, OfferQuery
from pricing.rank import expected_time, explain_offers, rank_offers
from tests.pricing.helpers import AWS_V7_HEADER, write_csv

HEADER = list(AWS_V7_HEADER)


def test_on_demand_is_just_the_work():
    t = expected_time(0.0, 10.0)
    assert t.expected_hours[0] == pytest.approx(10.0)
    assert t.lost_work[0] == 0 and t.restarts[0] == 0 and t.checkpoints[0] == 0
    assert math.isinf(t.checkpoint_hours[0])


def test_hand_computed_fixed_interval():
    lam, W, tau, C, R = 0.1, 10.0, 1.0, 0.1, 0.2
    t = expected_time(lam, W, checkpoint_hours=tau, checkpoint_cost_hours=C, restart_hours=R)
    segs, s = W / tau, tau + C
    e = math.exp(lam * s) - 1
    total = segs * (1 / lam + R) * e  # 11.860...
    assert total == pytest.approx(11.8604, abs=1e-3)
    assert t.expected_hours[0] == pytest.approx(total)
    assert t.checkpoints[0] == pytest.approx(segs * C)
    assert t.restarts[0] == pytest.approx(segs * e * R)
    assert t.work[0] + t.checkpoints[0] + t.lost_work[0] + t.restarts[0] == pytest.approx(total)


def test_young_daly_default_and_near_optimal():
    lam, W, C, R = 0.05, 100.0, 0.05, 0.1
    t = expected_time(lam, W, checkpoint_cost_hours=C, restart_hours=R)
    assert t.checkpoint_hours[0] == pytest.approx(math.sqrt(2 * C / lam))
    grid = np.linspace(0.2, 5, 400)
    best = min(
        expected_time(lam, W, checkpoint_hours=g, checkpoint_cost_hours=C, restart_hours=R).expected_hours[0]
        for g in grid
    )
    assert t.expected_hours[0] <= best * 1.01


def test_interval_longer_than_job_means_no_checkpoints():
    t = expected_time(0.01, 2.0, checkpoint_hours=5.0, checkpoint_cost_hours=0.5, restart_hours=0.0)
    assert t.checkpoints[0] == 0
    assert t.expected_hours[0] == pytest.approx((math.exp(0.01 * 2.0) - 1) / 0.01)


def test_model_matches_simulation():
    lam, W, tau, C, R = 0.3, 4.0, 0.5, 0.05, 0.1
    rng = random.Random(7)
    runs, total = 4000, 0.0
    for _ in range(runs):
        clock, done = 0.0, 0.0
        while done < W - 1e-9:
            seg = tau + C
            fail = rng.expovariate(lam)
            if fail >= seg:
                clock += seg
                done += tau
            else:
                clock += fail + R
        total += clock
    sim = total / runs
    model = expected_time(lam, W, checkpoint_hours=tau, checkpoint_cost_hours=C, restart_hours=R).expected_hours[0]
    assert model == pytest.approx(sim, rel=0.03)


def test_huge_hazard_does_not_overflow():
    t = expected_time(np.array([0.0, 1e6]), 1000.0)
    assert np.isfinite(t.expected_hours[0]) and t.expected_hours[1] > 1000


# ---- ranking over a small catalog written as real vms.csv files --------------------------------


@pytest.fixture
def small_catalog(tmp_path):
    aws = [
        ["p5.48xlarge", "H100", "8", "192", "2048", "", "98.32", "30.0", "us-east-1", "use1-az1"],
        ["p5.48xlarge", "H100", "8", "192", "2048", "", "98.32", "120.0", "us-east-1", "use1-az2"],  # spot > od
        ["p5.48xlarge", "H100", "8", "192", "2048", "", "98.32", "", "us-west-2", "usw2-az1"],  # no spot
        ["p4d.24xlarge", "A100", "8", "96", "1152", "", "32.77", "12.0", "us-east-1", "use1-az1"],
        ["g5.xlarge", "A10G", "1", "4", "16", "", "1.006", "0.4", "eu-west-1", "euw1-az1"],
    ]
    runpod = [
        ["8x_H100_SECURE", "H100", "8", "128", "1000", "H100", "31.92", "", "US", "US-KS-1"],
        ["8x_H100-SXM_SECURE", "H100-SXM", "8", "128", "1000", "H100-SXM", "35.0", "", "US", "US-KS-2"],
        ["8x_H100_SECURE", "H100", "8", "128", "1000", "H100", "31.92", "", "CA", "CA-MTL-1"],  # tie with US
    ]
    write_csv(tmp_path / "cat" / "aws" / "vms.csv", HEADER, aws)
    write_csv(tmp_path / "cat" / "runpod" / "vms.csv", HEADER, runpod)
    risk = tmp_path / "risk.yaml"
    # overrides beat the shipped advisor table, so the hazards are known here
    risk.write_text("overrides:\n  - {cloud: aws, hazard_per_hour: 0.1}\n  - {cloud: runpod, hazard_per_hour: 0.2}\n")
    return load_catalog(tmp_path / "cat", cache_dir=tmp_path / "cache", risk_file=risk)


def _key(s):
    o = s.offer
    return (o.cloud, o.region, o.zone, o.instance_type, o.spot)


def test_rank_h100x8_by_expected_cost(small_catalog):
    q = OfferQuery(
        gpus=(GpuRequest("H100", 8),),
        work_hours=10,
        checkpoint_minutes=60,
        checkpoint_cost_minutes=6,
        restart_overhead_minutes=12,
    )
    rep = explain_offers(small_catalog, q)
    # spot at 30.0 with λ=0.1: E = 10*(10+0.2)*(e^{0.11}-1) = 11.8604 h -> $355.8
    e_spot = 10 * (10 + 0.2) * (math.exp(0.1 * 1.1) - 1)
    # on-demand: 10 h plus the fixed checkpoint cost 10 * 0.1 h = 11 h
    expected = [
        (("runpod", "CA", "CA-MTL-1", "8x_H100_SECURE", False), 31.92 * 11),  # $351.1
        (("runpod", "US", "US-KS-1", "8x_H100_SECURE", False), 31.92 * 11),
        (("aws", "us-east-1", "use1-az1", "p5.48xlarge", True), 30.0 * e_spot),  # cheaper per hour, but $355.8
        (("runpod", "US", "US-KS-2", "8x_H100-SXM_SECURE", False), 35.0 * 11),  # family H100 includes H100-SXM
        (("aws", "us-east-1", "use1-az1", "p5.48xlarge", False), 98.32 * 11),
        (("aws", "us-east-1", "use1-az2", "p5.48xlarge", False), 98.32 * 11),
        (("aws", "us-west-2", "usw2-az1", "p5.48xlarge", False), 98.32 * 11),
    ]
    assert [_key(s) for s in rep.offers] == [k for k, _ in expected]
    for s, (_, cost) in zip(rep.offers, expected, strict=True):
        assert s.expected_cost_usd == pytest.approx(cost)
    assert [s.rank for s in rep.offers] == list(range(1, 8))
    assert rep.dropped == {"spot price not below on-demand (take the on-demand offer)": 1}
    top = rep.offers[2]
    assert top.parts["work_hours"] == 10 and top.parts["checkpoint_hours"] == pytest.approx(1.0)
    assert sum(top.parts.values()) == pytest.approx(top.expected_hours)


def test_variant_request_matches_only_variant(small_catalog):
    got = rank_offers(small_catalog, OfferQuery(gpus=(GpuRequest("H100-SXM", 8),)))
    assert [s.offer.instance_type for s in got] == ["8x_H100-SXM_SECURE"]


def test_filters(small_catalog):
    def keys(**kw):
        return {_key(s) for s in rank_offers(small_catalog, OfferQuery(**kw))}

    assert keys(gpus=(GpuRequest("H100", 8),), spot=True) == {("aws", "us-east-1", "use1-az1", "p5.48xlarge", True)}
    assert {k[0] for k in keys(clouds=("runpod",))} == {"runpod"}
    assert {k[1] for k in keys(regions=("us-east-1",))} == {"us-east-1"}
    assert not any(k[1] == "us-east-1" for k in keys(exclude_regions=("us-east-1",)))
    assert {k[3] for k in keys(min_gpu_memory_gib=600)} == {"p5.48xlarge", "8x_H100_SECURE", "8x_H100-SXM_SECURE"}
    assert {k[3] for k in keys(min_vcpus=150)} == {"p5.48xlarge"}
    assert {k[3] for k in keys(min_memory_gib=1000, max_price_usd_per_hour=33)} == {
        "p4d.24xlarge",
        "8x_H100_SECURE",
        "p5.48xlarge",
    }
    assert keys(gpus=(GpuRequest("A100", 8), GpuRequest("A10G", 1)), spot=False) == {
        ("aws", "us-east-1", "use1-az1", "p4d.24xlarge", False),
        ("aws", "eu-west-1", "euw1-az1", "g5.xlarge", False),
    }


def test_excluded_region_is_explained(small_catalog):
    rep = explain_offers(small_catalog, OfferQuery(gpus=(GpuRequest("A10G", 1),), exclude_regions=("us-east-1",)))
    assert "in an excluded region" not in rep.dropped  # nothing of that shape there
    with pytest.raises(NoOfferError, match="excluded region"):
        explain_offers(small_catalog, OfferQuery(gpus=(GpuRequest("A100", 8),), exclude_regions=("us-east-1",)))


def test_ties_are_deterministic_and_limit(small_catalog):
    q = OfferQuery(gpus=(GpuRequest("H100", 8),), spot=False)
    a = [_key(s) for s in rank_offers(small_catalog, q)]
    shuffled = small_catalog.offers.sample(frac=1.0, random_state=3)
    b = [_key(s) for s in rank_offers(type(small_catalog)(shuffled, small_catalog.sources), q)]
    assert a == b
    assert a[0][1] == "CA" and a[1][1] == "US"  # equal cost and price: by region name
    assert [_key(s) for s in rank_offers(small_catalog, q, limit=2)] == a[:2]


@pytest.mark.parametrize(
    ("query", "err", "text"),
    [
        (OfferQuery(clouds=("awz",)), UnknownNameError, "aws"),
        (OfferQuery(clouds=("azure",)), BadInputError, "catalog refresh --clouds azure"),
        (OfferQuery(regions=("us-east-9",)), UnknownNameError, "us-east-1"),
        (OfferQuery(clouds=("runpod",), regions=("us-east-1",)), UnknownNameError, "US"),
        (OfferQuery(exclude_regions=("nowhere",)), UnknownNameError, "region"),
        (OfferQuery(gpus=(GpuRequest("H100", 3),)), NoOfferError, "H100:3"),
        (OfferQuery(gpus=(GpuRequest("A10G", 1),), max_price_usd_per_hour=0.1), NoOfferError, "max price"),
        (OfferQuery(work_hours=0), BadInputError, "work hours"),
        (OfferQuery(checkpoint_minutes=-5), BadInputError, "checkpoint"),
    ],
)
def test_bad_queries(small_catalog, query, err, text):
    with pytest.raises(err) as ei:
        rank_offers(small_catalog, query)
    assert text in str(ei.value)


def test_deadline_drops_offers_expected_to_be_late(small_catalog):
    base = dict(
        gpus=(GpuRequest("H100", 8),),
        work_hours=10,
        checkpoint_minutes=60,
        checkpoint_cost_minutes=6,
        restart_overhead_minutes=12,
    )
    rep = explain_offers(small_catalog, OfferQuery(**base, deadline_hours=11.5))
    # on-demand needs 11 h; the spot offer expects 11.86 h
    assert rep.offers and all(not s.offer.spot for s in rep.offers)
    assert rep.dropped["expected to miss the deadline"] == 1
    with pytest.raises(NoOfferError, match="miss the deadline"):
        explain_offers(small_catalog, OfferQuery(**base, deadline_hours=10.5))
