"""The AWS cluster program (inline Pulumi; everything comes from the spec, nothing global).

Network: a dedicated VPC per cluster with one public subnet in the offer's zone, an internet
gateway and a default route. Not the account's default VPC: a cluster stack must own (and on
destroy remove) everything it relies on, some accounts have no default VPC, and a default VPC
without an internet gateway leaves nodes unreachable for SSH (SkyPilot: "all candidate subnets
are private").

Security group: SSH (tcp/22) only from `ssh_allowed_cidr`; all traffic between members of the
group itself (multi-node NCCL); all egress. Nothing else is open.

Instances: N of them, spot via `instance_market_options` (one-time request, terminate on
interruption: our controller, not AWS, decides where the next attempt runs) or on-demand; root
volume gp3, encrypted, deleted with the instance, tagged explicitly; a `cluster` placement group
when N > 1. Checkpoint S3 bucket, tagged, kept on destroy unless configured otherwise.

Tags: the provider's `default_tags` carries the mandatory set, AND every taggable resource gets
the same tags explicitly (mocks and some resources, e.g. volumes created by run-instances, do not
see default_tags).
"""

from __future__ import annotations

import re

import pulumi
import pulumi_aws as aws

from infra.spec import MISSING_CIDR, MISSING_PUBLIC_KEY, ClusterInfraSpec

VPC_CIDR = "10.77.0.0/16"
SUBNET_CIDR = "10.77.0.0/20"
DEFAULT_AMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"



_ZONE_ID = re.compile(r"^[a-z]{2,5}\d+-az\d+$")


def is_zone_id(zone: str | None) -> bool:
    """`use1-az4` is a zone ID; `us-east-1a` a zone name."""
    return bool(zone and _ZONE_ID.match(zone))

def aws_program(spec: ClusterInfraSpec) -> None:
    """Declare the cluster's resources; exports the outputs `infra.stacks.StackOutputs` reads."""
    p = spec.prefix
    tags = dict(spec.tags)

    def tagged(name: str, **more: str) -> dict[str, str]:
        return {**tags, "Name": name, **more}

    provider = aws.Provider(
        f"{p}-aws",
        region=spec.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
        endpoints=[aws.ProviderEndpointArgs(**spec.aws.endpoints)] if spec.aws.endpoints else None,
        skip_credentials_validation=spec.aws.skip_credentials_validation or None,
        skip_requesting_account_id=spec.aws.skip_requesting_account_id or None,
        s3_use_path_style=spec.aws.s3_use_path_style or None,
    )
    opts = pulumi.ResourceOptions(provider=provider)

    vpc = aws.ec2.Vpc(
        f"{p}-vpc", cidr_block=VPC_CIDR, enable_dns_hostnames=True, enable_dns_support=True,
        tags=tagged(f"{p}-vpc"), opts=opts,
    )
    igw = aws.ec2.InternetGateway(f"{p}-igw", vpc_id=vpc.id, tags=tagged(f"{p}-igw"), opts=opts)
    # SkyPilot's AWS catalog names spot zones by zone ID (`use1-az4`), which is the same physical
    # zone in every account; zone names (`us-east-1a`) are shuffled per account.
    zone_by_id = is_zone_id(spec.zone)
    subnet = aws.ec2.Subnet(
        f"{p}-subnet", vpc_id=vpc.id, cidr_block=SUBNET_CIDR,
        availability_zone=None if zone_by_id else spec.zone,
        availability_zone_id=spec.zone if zone_by_id else None,
        map_public_ip_on_launch=True, tags=tagged(f"{p}-subnet"), opts=opts,
    )
    route_table = aws.ec2.RouteTable(
        f"{p}-rt", vpc_id=vpc.id,
        routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
        tags=tagged(f"{p}-rt"), opts=opts,
    )
    aws.ec2.RouteTableAssociation(f"{p}-rta", subnet_id=subnet.id, route_table_id=route_table.id, opts=opts)

    sg = aws.ec2.SecurityGroup(
        f"{p}-sg",
        vpc_id=vpc.id,
        description=f"gpu-launcher {spec.stack_name}: SSH from {spec.ssh_allowed_cidr or 'the allowed CIDR'} only",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(
                description="ssh", protocol="tcp", from_port=22, to_port=22,
                cidr_blocks=[spec.ssh_allowed_cidr or MISSING_CIDR],
            ),
            aws.ec2.SecurityGroupIngressArgs(
                description="cluster-internal", protocol="-1", from_port=0, to_port=0, self=True,
            ),
        ],
        egress=[
            aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]),
        ],
        tags=tagged(f"{p}-sg"),
        opts=opts,
    )
    key = aws.ec2.KeyPair(
        f"{p}-key", key_name=p, public_key=spec.ssh_public_key or MISSING_PUBLIC_KEY,
        tags=tagged(f"{p}-key"), opts=opts,
    )

    placement = None
    if spec.num_nodes > 1:
        placement = aws.ec2.PlacementGroup(
            f"{p}-pg", name=p, strategy="cluster", tags=tagged(f"{p}-pg"), opts=opts
        )

    if spec.image_id:
        ami: pulumi.Input[str] = spec.image_id
    else:
        ami = aws.ec2.get_ami_output(
            most_recent=True,
            owners=["amazon"],
            filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[DEFAULT_AMI_NAME])],
            opts=pulumi.InvokeOutputOptions(provider=provider),
        ).id

    market = None
    if spec.spot:
        market = aws.ec2.InstanceInstanceMarketOptionsArgs(
            market_type="spot",
            spot_options=aws.ec2.InstanceInstanceMarketOptionsSpotOptionsArgs(
                spot_instance_type="one-time", instance_interruption_behavior="terminate",
            ),
        )

    instances = []
    for rank in range(spec.num_nodes):
        name = f"{p}-node-{rank}"
        instances.append(
            aws.ec2.Instance(
                name,
                ami=ami,
                instance_type=spec.instance_type,
                availability_zone=None if zone_by_id else spec.zone,  # else the subnet decides
                subnet_id=subnet.id,
                vpc_security_group_ids=[sg.id],
                key_name=key.key_name,
                placement_group=placement.name if placement else None,
                instance_market_options=market,
                # IMDSv2 only; hop limit 2 so the job's preemption watcher can reach the
                # spot/instance-action endpoint from inside a container.
                metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2
                ),
                root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                    volume_size=spec.disk_size_gib,
                    volume_type=spec.disk_type or "gp3",
                    encrypted=True,
                    delete_on_termination=True,
                    tags=tagged(f"{name}-root"),
                ),
                tags=tagged(name, **{"node-rank": str(rank)}),
                opts=opts,
            )
        )

    bucket = None
    if spec.checkpoint_bucket:
        bucket = aws.s3.Bucket(
            f"{p}-ckpt",
            bucket=spec.bucket_name,
            force_destroy=spec.bucket_force_destroy,
            tags=tagged(spec.bucket_name),
            opts=pulumi.ResourceOptions(provider=provider, retain_on_delete=spec.retain_bucket_on_destroy),
        )

    pulumi.export("cloud", "aws")
    pulumi.export("region", spec.region)
    pulumi.export("zone", spec.zone)
    pulumi.export("ssh_user", spec.ssh_user)
    pulumi.export("instance_ids", [i.id for i in instances])
    pulumi.export("public_ips", [i.public_ip for i in instances])
    pulumi.export("private_ips", [i.private_ip for i in instances])
    pulumi.export("bucket", bucket.bucket if bucket else None)
