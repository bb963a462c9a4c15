"""The offers service (launcher.planning.offers): typed rows, the same answer `launcher offers
--json` prints, and the launch view make_plan ranks with (reachable clusters only, errors that
say what is missing)."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from launcher.clusters import ClustersFile, ClusterEntry
from launcher.clusters.offers import Reachability
from launcher.errors import NoOfferError
from launcher.planning.offers import Declared, OfferRow, OffersQuery, OffersResult, offers
from pricing.models import OfferQuery
from tests.conftest import run_cli


def test_listing_matches_the_cli_json_and_is_typed():
    result = offers(OffersQuery(gpu_names=("H100:8",), limit=5))
    assert isinstance(result, OffersResult) and len(result.rows) == 5
    assert all(isinstance(r, OfferRow) for r in result.rows)
    assert [r.scored.rank for r in result.rows] == [1, 2, 3, 4, 5]
    with pytest.raises(FrozenInstanceError):
        result.rows[0].enabled = True  # type: ignore[misc]
    p = run_cli("offers", "--gpus", "H100:8", "--limit", "5", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == json.loads(json.dumps([r.as_record() for r in result.rows], default=str))
    assert result.matched >= 5 and set(result.sources) >= {"aws", "gcp"}


def _declared(reachable: bool) -> Declared:
    entry = ClusterEntry(name="gpu-a", infra="slurm/gpu-a", gpu="H100", gpus_per_node=8, price_usd_per_gpu_hour=0.5)
    return Declared(ClustersFile(clusters=[entry]), {"gpu-a": Reachability(reachable, "why")})


def test_launch_view_merges_reachable_clusters_with_the_catalog():
    q = OfferQuery(gpus=None, clouds=("slurm", "aws"), work_hours=2.0)
    got = offers(OffersQuery(filters=q, gpu_names=("H100:8",), launch=True, declared=_declared(True)))
    first = got.rows[0].scored
    assert (first.offer.cloud, first.offer.region, first.rank) == ("slurm", "gpu-a", 1)  # $4/h beats any H100:8
    assert first.expected_cost_usd == pytest.approx(8.0)
    assert {r.scored.offer.cloud for r in got.rows} == {"slurm", "aws"}
    costs = [r.scored.expected_cost_usd for r in got.rows]
    assert costs == sorted(costs)


def test_launch_view_leaves_out_unreachable_clusters_and_says_so():
    q = OfferQuery(clouds=("slurm",))
    with pytest.raises(NoOfferError, match="no declared slurm cluster fits"):
        offers(OffersQuery(filters=q, launch=True, declared=_declared(False)))
    listing = offers(OffersQuery(filters=q, declared=_declared(False)))
    [row] = listing.rows
    assert row.declared and row.enabled is False and row.cluster_reason == "why"
    assert row.as_record()["reason"] == "why" and "price_as_of" not in row.as_record()


def test_launch_view_names_clouds_the_catalog_does_not_price():
    with pytest.raises(NoOfferError, match="the catalog has no prices for azure"):
        offers(OffersQuery(filters=OfferQuery(clouds=("azure",)), launch=True))
