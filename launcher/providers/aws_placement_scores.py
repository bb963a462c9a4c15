"""AWS spot placement scores (EC2 GetSpotPlacementScores) for the plan's spot offers.

A score (1-10) says how likely a request for the capacity is to succeed now, per Availability Zone.
AWS names zones by id in the answer (`use1-az4`: the same physical zone in every account) and by
name in everything else (`us-east-1a`: shuffled per account), so each region's id -> name map is read
from DescribeAvailabilityZones. One GetSpotPlacementScores query per instance type (a query with
several types scores the mix, not each type) and per 10 regions (the API's limit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from launcher.errors import ProviderError
from pricing.models import Offer

MAX_REGIONS_PER_QUERY = 10  # GetSpotPlacementScores RegionNames


def spot_placement_scores(
    offers: Sequence[Offer],
    num_nodes: int,
    *,
    client: Callable[[str], Any],
    api: Callable[[Callable[[], Any]], Any],
    query_region: str,
) -> dict[Offer, int]:
    """Scores for the AWS spot offers among `offers`. `client(region)` gives an EC2 client, `api(call)`
    runs one call and maps its failure to ProviderError. A zone-less (regional) offer gets the best
    score among its region's zones, since a request there may land in any of them."""
    spot = [o for o in offers if o.spot and o.cloud == "aws"]
    if not spot:
        return {}
    regions = sorted({o.region for o in spot})
    zone_name: dict[tuple[str, str], str] = {}
    for r in regions:
        resp = api(lambda r=r: client(r).describe_availability_zones(Filters=[{"Name": "region-name", "Values": [r]}]))
        for az in resp.get("AvailabilityZones", []):
            zone_name[(r, az["ZoneId"])] = az["ZoneName"]
    out: dict[Offer, int] = {}
    ec2 = client(query_region)
    for itype in sorted({o.instance_type for o in spot}):
        by_zone: dict[tuple[str, str], int] = {}
        for i in range(0, len(regions), MAX_REGIONS_PER_QUERY):
            chunk = regions[i : i + MAX_REGIONS_PER_QUERY]
            try:
                pages = api(lambda chunk=chunk, itype=itype: list(ec2.get_paginator("get_spot_placement_scores").paginate(
                    InstanceTypes=[itype], TargetCapacity=max(1, num_nodes), TargetCapacityUnitType="units",
                    SingleAvailabilityZone=True, RegionNames=chunk,
                )))  # fmt: skip
            except ProviderError as e:
                if "GetSpotPlacementScores" in e.message:
                    raise
                raise type(e)(f"GetSpotPlacementScores: {e.message}", hint=e.hint) from e
            for page in pages:
                for s in page.get("SpotPlacementScores", []):
                    name = zone_name.get((s.get("Region", ""), s.get("AvailabilityZoneId", "")))
                    if name is not None and "Score" in s:
                        by_zone[(s["Region"], name)] = int(s["Score"])
        for o in spot:
            if o.instance_type != itype:
                continue
            if o.zone:
                score = by_zone.get((o.region, o.zone))
            else:
                score = max((v for (r, _), v in by_zone.items() if r == o.region), default=None)
            if score is not None:
                out[o] = score
    return out
