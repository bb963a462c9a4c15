"""AWS spot placement scores. moto does not implement GetSpotPlacementScores, so the answers come from
botocore's Stubber on the real EC2 client (it checks every request against EC2's service model, and
every canned answer against the response shape); against a real moto_server the zone-id map is read
for real and the unimplemented call fails as a ProviderError the controller can shrug off."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from launcher.errors import ProviderError
from launcher.providers.aws import AwsProvider
from launcher.providers.base import SpotPlacementScores
from pricing.models import Offer
from tests.conftest import botocore_session


def offer(region: str, zone: str | None, itype: str = "p3.2xlarge", *, spot: bool = True, cloud: str = "aws") -> Offer:
    return Offer(cloud=cloud, region=region, zone=zone, instance_type=itype, accelerator="V100", accelerator_count=1,
                 vcpus=8, memory_gib=61, gpu_memory_gib=16, spot=spot, price_usd_per_hour=1.0,
                 on_demand_price_usd_per_hour=3.06)  # fmt: skip


def azs(region: str, pairs: list[tuple[str, str]]) -> dict:
    return {"AvailabilityZones": [{"ZoneName": n, "ZoneId": i, "RegionName": region, "State": "available"} for n, i in pairs]}


def az_params(region: str) -> dict:
    return {"Filters": [{"Name": "region-name", "Values": [region]}]}


@pytest.fixture
def provider(monkeypatch):
    for k in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    session = boto3.Session(aws_access_key_id="AKIATEST", aws_secret_access_key="secret-do-not-log",
                            region_name="us-east-1", botocore_session=botocore_session())  # fmt: skip
    return AwsProvider(["us-east-1", "us-west-2"], session=session)


def test_scores_map_zone_ids_to_the_accounts_zone_names_per_instance_type(provider):
    assert isinstance(provider, SpotPlacementScores)
    east, west = provider.client("ec2", "us-east-1", quick=True), provider.client("ec2", "us-west-2", quick=True)
    a = offer("us-east-1", "us-east-1a")
    b = offer("us-east-1", "us-east-1b")
    regional = offer("us-west-2", None)
    other_type = offer("us-west-2", "us-west-2a", "g5.xlarge")
    ignored = [offer("us-east-1", "us-east-1a", spot=False), offer("us-east-1", "us-east-1a", cloud="gcp")]
    with Stubber(east) as se, Stubber(west) as sw:
        # Zone names are per account: here us-east-1a is use1-az4, not use1-az1.
        se.add_response("describe_availability_zones", azs("us-east-1", [("us-east-1a", "use1-az4"), ("us-east-1b", "use1-az1")]),
                        az_params("us-east-1"))  # fmt: skip
        sw.add_response("describe_availability_zones", azs("us-west-2", [("us-west-2a", "usw2-az2"), ("us-west-2b", "usw2-az1")]),
                        az_params("us-west-2"))  # fmt: skip
        q = {"TargetCapacityUnitType": "units", "SingleAvailabilityZone": True, "RegionNames": ["us-east-1", "us-west-2"]}
        se.add_response("get_spot_placement_scores", {"SpotPlacementScores": [
            {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az1", "Score": 9},
            {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az2", "Score": 2},
        ]}, {"InstanceTypes": ["g5.xlarge"], "TargetCapacity": 2, **q})  # fmt: skip
        se.add_response("get_spot_placement_scores", {"SpotPlacementScores": [
            {"Region": "us-east-1", "AvailabilityZoneId": "use1-az1", "Score": 8},
            {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az2", "Score": 3},
        ], "NextToken": "page-2"}, {"InstanceTypes": ["p3.2xlarge"], "TargetCapacity": 2, **q})  # fmt: skip
        se.add_response("get_spot_placement_scores", {"SpotPlacementScores": [
            {"Region": "us-east-1", "AvailabilityZoneId": "use1-az4", "Score": 1},
            {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az1", "Score": 6},
        ]}, {"InstanceTypes": ["p3.2xlarge"], "TargetCapacity": 2, "NextToken": "page-2", **q})  # fmt: skip
        scores = provider.spot_placement_scores([a, b, regional, other_type, *ignored], 2)
        se.assert_no_pending_responses()
        sw.assert_no_pending_responses()
    # The id use1-az4 is this account's us-east-1a; a regional offer may land in any zone: its best.
    assert scores == {a: 1, b: 8, regional: 6, other_type: 2}


def test_a_refusal_is_a_provider_error_without_the_secret(provider):
    east = provider.client("ec2", "us-east-1", quick=True)
    with Stubber(east) as se:
        se.add_response("describe_availability_zones", azs("us-east-1", [("us-east-1a", "use1-az4")]), az_params("us-east-1"))
        se.add_client_error("get_spot_placement_scores", "UnauthorizedOperation",
                            "You are not authorized to perform: ec2:GetSpotPlacementScores")  # fmt: skip
        with pytest.raises(ProviderError) as e:
            provider.spot_placement_scores([offer("us-east-1", "us-east-1a")], 1)
    assert "UnauthorizedOperation" in str(e.value) and "GetSpotPlacementScores" in str(e.value)
    assert "secret-do-not-log" not in str(e.value) and "AKIATEST" not in str(e.value)


def test_no_aws_spot_offer_asks_nothing(provider):
    # A Stubber with nothing queued fails any call made through it.
    with Stubber(provider.client("ec2", "us-east-1", quick=True)):
        assert provider.spot_placement_scores([offer("us-east-1", "us-east-1a", spot=False)], 1) == {}


def test_against_moto_server_the_unimplemented_call_is_a_provider_error(aws_env):
    p = AwsProvider(["us-east-1"], endpoint_url=aws_env)
    # The zone map is real: moto answers DescribeAvailabilityZones with ids.
    zones = p.client("ec2", "us-east-1", quick=True).describe_availability_zones()["AvailabilityZones"]
    assert zones and all(z["ZoneId"] for z in zones)
    with pytest.raises(ProviderError, match="GetSpotPlacementScores"):
        p.spot_placement_scores([offer("us-east-1", zones[0]["ZoneName"])], 1)
