"""Both Pulumi programs under pulumi.runtime.set_mocks: resource types, spot settings, tags and
labels on every billable resource, naming, placement, and SSH exposure.

Most tests read the plan from `infra.plan.resource_plan` (which runs the program under a
recording Mocks); two tests use `@pulumi.runtime.test` with their own Mocks, so the plan
recorder cannot hide a difference.
"""

from __future__ import annotations

import pulumi
import pytest

from infra.plan import resource_plan
from infra.spec import AwsProviderSettings
from infra.tags import is_valid_gcp_label
from tests.infra.helpers import CIDR, PUBKEY, make_spec

# The provider SDKs warn about their own deprecated aliases when first imported.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

AWS_INSTANCE = "aws:ec2/instance:Instance"
GCP_INSTANCE = "gcp:compute/instance:Instance"


def by_type(plan, typ):
    return [r for r in plan if r.type == typ]


def each(plan, typ, n=2):
    """The plan's resources of a type, asserting there are exactly n (the fixtures' node count),
    so a loop over them cannot pass by running zero times."""
    found = by_type(plan, typ)
    assert len(found) == n, (typ, [r.name for r in plan])
    return found


def one(plan, typ):
    found = by_type(plan, typ)
    assert len(found) == 1, (typ, [r.name for r in plan])
    return found[0]


@pytest.fixture(scope="module")
def aws_spot2():
    return make_spec("aws", num_nodes=2), resource_plan(make_spec("aws", num_nodes=2))


@pytest.fixture(scope="module")
def aws_od1():
    spec = make_spec("aws", spot=False, image_id="ami-0123456789abcdef0", disk_size_gib=500)
    return spec, resource_plan(spec)


@pytest.fixture(scope="module")
def gcp_n1_spot2():
    spec = make_spec("gcp", num_nodes=2, accelerator_count=2)
    return spec, resource_plan(spec)


@pytest.fixture(scope="module")
def gcp_a2_od2():
    spec = make_spec("gcp", instance_type="a2-highgpu-1g", accelerator="A100", num_nodes=2, spot=False)
    return spec, resource_plan(spec)


# ---- AWS ----------------------------------------------------------------------------------------

def test_aws_resource_types_and_counts(aws_spot2):
    _spec, plan = aws_spot2
    types = [r.type for r in plan]
    assert types.count(AWS_INSTANCE) == 2
    for t in ("pulumi:providers:aws", "aws:ec2/vpc:Vpc", "aws:ec2/internetGateway:InternetGateway",
              "aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/securityGroup:SecurityGroup",
              "aws:ec2/keyPair:KeyPair", "aws:ec2/placementGroup:PlacementGroup", "aws:s3/bucket:Bucket"):
        assert types.count(t) == 1, t


def test_aws_spot_instances_use_one_time_terminate_market_options(aws_spot2):
    _spec, plan = aws_spot2
    for inst in each(plan, AWS_INSTANCE):
        mo = inst.inputs["instanceMarketOptions"]
        assert mo["marketType"] == "spot"
        assert mo["spotOptions"] == {"spotInstanceType": "one-time", "instanceInterruptionBehavior": "terminate"}
        assert inst.inputs["instanceType"] == "p3.2xlarge"
        assert inst.inputs["availabilityZone"] == "us-east-1a"
        # IMDSv2 with a hop limit that lets a containerized job read its spot notice
        assert inst.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 2}


def test_aws_on_demand_has_no_market_options_and_takes_image_and_disk(aws_od1):
    _spec, plan = aws_od1
    (inst,) = by_type(plan, AWS_INSTANCE)
    assert "instanceMarketOptions" not in inst.inputs
    assert inst.inputs["ami"] == "ami-0123456789abcdef0"
    assert inst.inputs["rootBlockDevice"]["volumeSize"] == 500
    assert inst.inputs["rootBlockDevice"]["volumeType"] == "gp3"
    assert inst.inputs["rootBlockDevice"]["deleteOnTermination"] is True


def test_aws_every_taggable_resource_carries_all_tags_explicitly(aws_spot2):
    spec, plan = aws_spot2
    provider = one(plan, "pulumi:providers:aws")
    assert provider.inputs["defaultTags"]["tags"] == spec.tags
    untaggable = {"pulumi:providers:aws", "aws:ec2/routeTableAssociation:RouteTableAssociation"}
    for r in plan:
        if r.type in untaggable:
            continue
        assert r.tags is not None, r.name
        assert spec.tags.items() <= r.tags.items(), r.name
    # billable: instances, their root volumes, the bucket
    billable = [r for r in plan if r.billable]
    assert sorted(r.type for r in billable) == sorted([AWS_INSTANCE] * 2 + ["aws:s3/bucket:Bucket"])
    for inst in each(plan, AWS_INSTANCE):
        assert spec.tags.items() <= inst.inputs["rootBlockDevice"]["tags"].items()


def test_aws_names_are_derived_from_project_and_cluster(aws_spot2):
    spec, plan = aws_spot2
    names = sorted(r.tags["Name"] for r in by_type(plan, AWS_INSTANCE))
    assert names == ["vision-c1-node-0", "vision-c1-node-1"]
    assert [r.tags["node-rank"] for r in by_type(plan, AWS_INSTANCE)] == ["0", "1"]
    assert one(plan, "aws:s3/bucket:Bucket").inputs["bucket"] == spec.bucket_name
    assert one(plan, "aws:ec2/keyPair:KeyPair").inputs["keyName"] == "vision-c1"
    assert one(plan, "aws:ec2/keyPair:KeyPair").inputs["publicKey"] == PUBKEY
    assert all(r.urn.startswith("urn:pulumi:vision.c1::gpu-launcher::") for r in plan)


def test_aws_multi_node_shares_a_cluster_placement_group(aws_spot2, aws_od1):
    _spec, plan = aws_spot2
    pg = one(plan, "aws:ec2/placementGroup:PlacementGroup")
    assert pg.inputs["strategy"] == "cluster"
    assert {i.inputs["placementGroup"] for i in by_type(plan, AWS_INSTANCE)} == {pg.inputs["name"]}
    _spec1, plan1 = aws_od1
    assert not by_type(plan1, "aws:ec2/placementGroup:PlacementGroup")
    assert "placementGroup" not in by_type(plan1, AWS_INSTANCE)[0].inputs


def test_aws_ssh_only_from_the_allowed_cidr(aws_spot2):
    _spec, plan = aws_spot2
    sg = one(plan, "aws:ec2/securityGroup:SecurityGroup")
    ingress = sg.inputs["ingress"]
    world = [r for r in ingress if "0.0.0.0/0" in (r.get("cidrBlocks") or [])]
    assert world == []
    cidr_rules = [r for r in ingress if r.get("cidrBlocks")]
    assert len(cidr_rules) == 1
    rule = cidr_rules[0]
    assert (rule["protocol"], rule["fromPort"], rule["toPort"], rule["cidrBlocks"]) == ("tcp", 22, 22, [CIDR])
    others = [r for r in ingress if not r.get("cidrBlocks")]
    assert all(r.get("self") is True for r in others)  # intra-cluster only
    for inst in each(plan, AWS_INSTANCE):
        assert inst.inputs["vpcSecurityGroupIds"] == ["<vision-c1-sg.id>"]


def test_aws_every_resource_uses_the_explicit_provider(aws_spot2):
    _spec, plan = aws_spot2
    assert len([r for r in plan if not r.type.startswith("pulumi:providers:")]) >= 10  # vpc .. instances
    for r in plan:
        if not r.type.startswith("pulumi:providers:"):
            assert r.provider == "vision-c1-aws", r.name


def test_aws_zone_ids_from_the_catalog_place_the_subnet_by_zone_id():
    plan = resource_plan(make_spec("aws", zone="use1-az4"))
    subnet = one(plan, "aws:ec2/subnet:Subnet")
    assert subnet.inputs.get("availabilityZoneId") == "use1-az4"
    assert "availabilityZone" not in subnet.inputs
    (inst,) = by_type(plan, AWS_INSTANCE)
    assert "availabilityZone" not in inst.inputs  # the subnet places it


def test_aws_provider_takes_moto_style_endpoints():
    spec = make_spec("aws", aws=AwsProviderSettings.for_endpoint("http://127.0.0.1:5000"))
    provider = one(resource_plan(spec), "pulumi:providers:aws")
    endpoints = provider.inputs["endpoints"]
    assert endpoints[0]["ec2"] == endpoints[0]["s3"] == "http://127.0.0.1:5000"
    for flag in ("skipCredentialsValidation", "skipRequestingAccountId", "s3UsePathStyle"):
        assert str(provider.inputs[flag]).lower() == "true", flag
    assert provider.inputs["region"] == "us-east-1"


def test_plan_without_key_or_cidr_shows_what_up_will_need():
    spec = make_spec("aws", ssh_public_key=None, ssh_allowed_cidr=None)
    plan = resource_plan(spec)
    sg = one(plan, "aws:ec2/securityGroup:SecurityGroup")
    assert "required for up" in sg.inputs["ingress"][0]["cidrBlocks"][0]
    from infra.errors import InfraInputError as BadInputError

    with pytest.raises(BadInputError, match="--ssh-cidr"):
        spec.require_deployable()


# ---- GCP ----------------------------------------------------------------------------------------

def test_gcp_resource_types_and_counts(gcp_n1_spot2):
    _spec, plan = gcp_n1_spot2
    types = [r.type for r in plan]
    assert types.count(GCP_INSTANCE) == 2
    assert types.count("gcp:compute/firewall:Firewall") == 2
    for t in ("pulumi:providers:gcp", "gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork",
              "gcp:storage/bucket:Bucket"):
        assert types.count(t) == 1, t


def test_gcp_spot_scheduling(gcp_n1_spot2):
    _spec, plan = gcp_n1_spot2
    for inst in each(plan, GCP_INSTANCE):
        s = inst.inputs["scheduling"]
        assert s["provisioningModel"] == "SPOT"
        assert s["instanceTerminationAction"] == "DELETE"
        assert s["preemptible"] is True and s["automaticRestart"] is False
        assert s["onHostMaintenance"] == "TERMINATE"


def test_gcp_stop_termination_and_on_demand():
    plan = resource_plan(make_spec("gcp", spot_termination_action="STOP"))
    assert by_type(plan, GCP_INSTANCE)[0].inputs["scheduling"]["instanceTerminationAction"] == "STOP"


def test_gcp_on_demand_is_standard_and_restarts(gcp_a2_od2):
    _spec, plan = gcp_a2_od2
    for inst in each(plan, GCP_INSTANCE):
        s = inst.inputs["scheduling"]
        assert s["provisioningModel"] == "STANDARD"
        assert "instanceTerminationAction" not in s
        assert s["automaticRestart"] is True and s["onHostMaintenance"] == "TERMINATE"


def test_gcp_cpu_only_on_demand_migrates_and_has_no_accelerators():
    plan = resource_plan(make_spec("gcp", instance_type="n2-standard-8", accelerator=None, accelerator_count=0,
                                   spot=False))
    (inst,) = by_type(plan, GCP_INSTANCE)
    assert inst.inputs["scheduling"]["onHostMaintenance"] == "MIGRATE"
    assert "guestAccelerators" not in inst.inputs


def test_gcp_labels_on_every_billable_resource(gcp_n1_spot2):
    spec, plan = gcp_n1_spot2
    # Written by hand from helpers.make_tags (not computed by to_gcp_labels).
    labels = {
        "project": "vision", "experiment": "ft-3", "owner": "alice-example-com", "cost-center": "cc-1234",
        "run-id": "r-01", "cluster": "c1", "managed-by": "gpu-launcher",
        "created-at": "2026-11-30t08-00-00z", "expires-at": "2026-11-30t14-00-00z",
    }  # fmt: skip
    assert one(plan, "pulumi:providers:gcp").inputs["defaultLabels"] == labels
    billable = [r for r in plan if r.billable]
    assert sorted(r.type for r in billable) == sorted([GCP_INSTANCE] * 2 + ["gcp:storage/bucket:Bucket"])
    for r in billable:
        assert labels.items() <= r.tags.items(), r.name
        assert all(is_valid_gcp_label(k, v) for k, v in r.tags.items())
    for inst in each(plan, GCP_INSTANCE):
        assert inst.inputs["bootDisk"]["initializeParams"]["labels"] == labels
        assert inst.inputs["bootDisk"]["autoDelete"] is True


def test_gcp_gpus_as_guest_accelerators_only_where_not_built_in(gcp_n1_spot2, gcp_a2_od2):
    _spec, plan = gcp_n1_spot2
    for inst in each(plan, GCP_INSTANCE):
        assert inst.inputs["guestAccelerators"] == [{"type": "nvidia-tesla-v100", "count": 2}]
    _spec, plan = gcp_a2_od2
    for inst in each(plan, GCP_INSTANCE):
        assert "guestAccelerators" not in inst.inputs


def test_gcp_compact_placement_where_supported(gcp_n1_spot2, gcp_a2_od2):
    _spec, plan = gcp_a2_od2
    policy = one(plan, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": 2}
    assert {i.inputs["resourcePolicies"] for i in by_type(plan, GCP_INSTANCE)} == {"<vision-c1-compact.self_link>"}
    _spec, plan = gcp_n1_spot2  # n1 does not support compact placement
    assert not by_type(plan, "gcp:compute/resourcePolicy:ResourcePolicy")
    single = resource_plan(make_spec("gcp", instance_type="a2-highgpu-1g", accelerator="A100"))
    assert not by_type(single, "gcp:compute/resourcePolicy:ResourcePolicy")


def test_gcp_ssh_only_from_the_allowed_cidr(gcp_n1_spot2):
    spec, plan = gcp_n1_spot2
    fws = {r.name: r for r in by_type(plan, "gcp:compute/firewall:Firewall")}
    ssh, internal = fws["vision-c1-ssh"], fws["vision-c1-internal"]
    assert ssh.inputs["sourceRanges"] == [CIDR]
    assert ssh.inputs["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    assert "sourceRanges" not in internal.inputs
    assert internal.inputs["sourceTags"] == internal.inputs["targetTags"] == [spec.prefix]
    for inst in each(plan, GCP_INSTANCE):
        assert inst.inputs["tags"] == [spec.prefix]
        assert inst.inputs["metadata"]["ssh-keys"] == f"ubuntu:{PUBKEY}"


def test_gcp_names(gcp_n1_spot2):
    spec, plan = gcp_n1_spot2
    assert sorted(i.inputs["name"] for i in by_type(plan, GCP_INSTANCE)) == ["vision-c1-node-0", "vision-c1-node-1"]
    bucket = one(plan, "gcp:storage/bucket:Bucket")
    assert bucket.inputs["name"] == spec.bucket_name
    assert bucket.inputs["location"] == "US-CENTRAL1"
    assert bucket.inputs["forceDestroy"] is False


# ---- independent check with pulumi's own test decorator -----------------------------------------

class _Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.created = []

    def new_resource(self, args):
        self.created.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {"id": "ami-test"}


def test_aws_program_under_pulumi_runtime_test():
    from infra.aws_program import aws_program

    mocks = _Mocks()
    pulumi.runtime.set_mocks(mocks, project="gpu-launcher", stack="vision.c1", preview=False)
    spec = make_spec("aws", num_nodes=3)

    @pulumi.runtime.test
    def run():
        aws_program(spec)

    run()
    inst = [a for a in mocks.created if a.typ == AWS_INSTANCE]
    assert len(inst) == 3
    assert {a.inputs["ami"] for a in inst} == {"ami-test"}  # the default AMI comes from the lookup
    for a in inst:
        assert a.inputs["instanceMarketOptions"]["spotOptions"]["spotInstanceType"] == "one-time"
        assert spec.tags.items() <= a.inputs["tags"].items()
        assert spec.tags.items() <= a.inputs["rootBlockDevice"]["tags"].items()


def test_gcp_program_under_pulumi_runtime_test():
    from infra.gcp_program import gcp_program

    mocks = _Mocks()
    pulumi.runtime.set_mocks(mocks, project="gpu-launcher", stack="vision.c1", preview=False)
    spec = make_spec("gcp", checkpoint_bucket=False)

    @pulumi.runtime.test
    def run():
        gcp_program(spec)

    run()
    types = [a.typ for a in mocks.created]
    assert "gcp:storage/bucket:Bucket" not in types
    (inst,) = [a for a in mocks.created if a.typ == GCP_INSTANCE]
    assert inst.inputs["scheduling"]["provisioningModel"] == "SPOT"
    assert inst.inputs["labels"]["managed-by"] == "gpu-launcher"
