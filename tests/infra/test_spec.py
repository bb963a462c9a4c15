"""ClusterInfraSpec: built from a pricing Offer, validated before any program runs."""

from __future__ import annotations

import pytest

from infra.spec import ClusterInfraSpec, read_public_key
from infra.errors import InfraInputError as BadInputError
from pricing.models import Offer
from tests.infra.helpers import CIDR, PUBKEY, make_spec, make_tags


def offer(cloud="aws", zone="us-east-1a", **over):
    base = dict(cloud=cloud, region="us-east-1" if cloud == "aws" else "us-central1", zone=zone,
                instance_type="p3.8xlarge", accelerator="V100", accelerator_count=4, vcpus=32, memory_gib=244,
                gpu_memory_gib=64, spot=True, price_usd_per_hour=3.67)
    base.update(over)
    return Offer(**base)


def test_from_offer_carries_placement_market_and_gpus():
    spec = ClusterInfraSpec.from_offer(offer(), num_nodes=2, tags=make_tags(), ssh_allowed_cidr=CIDR,
                                       ssh_public_key=PUBKEY, disk_size_gib=300)
    assert (spec.cloud, spec.region, spec.zone, spec.instance_type) == ("aws", "us-east-1", "us-east-1a", "p3.8xlarge")
    assert (spec.accelerator, spec.accelerator_count, spec.num_nodes, spec.spot) == ("V100", 4, 2, True)
    assert (spec.project, spec.cluster, spec.stack_name, spec.disk_size_gib) == ("vision", "c1", "vision.c1", 300)
    spec.require_deployable()


def test_from_offer_refuses_clouds_without_a_program_and_region_level_gcp_offers_need_a_zone():
    with pytest.raises(BadInputError, match="no Pulumi program for cloud 'lambda'"):
        ClusterInfraSpec.from_offer(offer("lambda"), num_nodes=1, tags=make_tags())
    with pytest.raises(BadInputError, match="zone"):
        ClusterInfraSpec.from_offer(offer("gcp", zone=None), num_nodes=1, tags=make_tags())
    spec = ClusterInfraSpec.from_offer(offer("gcp", zone=None), num_nodes=1, tags=make_tags(), zone="us-central1-b")
    assert spec.zone == "us-central1-b"


def test_missing_tags_refuse_before_a_spec_exists():
    tags = make_tags()
    del tags["owner"]
    with pytest.raises(BadInputError, match="missing mandatory tags: owner"):
        ClusterInfraSpec.from_offer(offer(), num_nodes=1, tags=tags)


@pytest.mark.parametrize(
    "over, message",
    [
        ({"ssh_allowed_cidr": "my laptop"}, "not a CIDR"),
        ({"num_nodes": 0}, "num_nodes"),
        ({"accelerator": None}, "accelerator"),
        ({"cluster": "other"}, "tags project/cluster"),
        ({"colour": "blue"}, "colour"),
        ({"checkpoint_bucket_name": "My_Bucket"}, "bucket name"),
    ],
)
def test_bad_fields_become_one_bad_input_error(over, message):
    with pytest.raises(BadInputError, match=message):
        make_spec("aws", tags=make_tags(), **over)


def test_cidr_is_normalized():
    assert make_spec("aws", ssh_allowed_cidr="203.0.113.7/24").ssh_allowed_cidr == "203.0.113.0/24"


def test_read_public_key(tmp_path):
    good = tmp_path / "id.pub"
    good.write_text(PUBKEY + "\n")
    assert read_public_key(good) == PUBKEY
    bad = tmp_path / "id"
    bad.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    with pytest.raises(BadInputError, match="does not look like"):
        read_public_key(bad)
    with pytest.raises(BadInputError, match="no such public key"):
        read_public_key(tmp_path / "absent.pub")


def test_bucket_name_default_and_override():
    assert make_spec("aws").bucket_name.startswith("vision-c1-ckpt-")
    assert make_spec("aws", checkpoint_bucket_name="team-ckpts-01").bucket_name == "team-ckpts-01"
