"""The GCP cluster program (inline Pulumi; everything comes from the spec, nothing global).

Network: a dedicated VPC network with one subnetwork in the offer's region; a firewall rule for
SSH (tcp/22) only from `ssh_allowed_cidr`, and one allowing all traffic between the cluster's
own nodes (matched by a network tag). Nothing else is open.

Instances: N of them. Spot: `provisioning_model=SPOT`, `preemptible=True`,
`automatic_restart=False`, `instance_termination_action` DELETE (default; or STOP), as GCP's
Spot VM docs require. On-demand: STANDARD with automatic restart. GPUs need
`on_host_maintenance=TERMINATE`. Accelerator-optimized families (a2, a3, a4, g2, g4) come with
their GPUs; others (n1) get them as `guest_accelerators`. For N > 1 nodes a COLLOCATED resource
policy (compact placement) is attached where the machine family supports it (not n1/e2).
Boot disk carries the labels. Checkpoint GCS bucket, labelled, kept on destroy unless configured.

Labels: tags sanitized by `infra.tags.to_gcp_labels` (mapping in that module's docstring), set
explicitly on every labelled resource and as the provider's `default_labels`.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.spec import MISSING_CIDR, MISSING_PUBLIC_KEY, ClusterInfraSpec
from infra.tags import to_gcp_labels

SUBNET_CIDR = "10.77.0.0/20"
DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-ubuntu-2204-py310"

# Families whose machine types include their GPUs (no guest_accelerators allowed).
GPU_BUILTIN_FAMILIES = frozenset({"a2", "a3", "a4", "g2", "g4"})
# Families that support compact placement policies.
COMPACT_PLACEMENT_FAMILIES = frozenset({"a2", "a3", "a4", "c2", "c2d", "c3", "c3d", "c4", "c4d", "g2", "h3", "n2", "n2d"})
_ACCELERATOR_TYPES = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4",
    "K80": "nvidia-tesla-k80",
    "A100": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "L4": "nvidia-l4",
    "H100": "nvidia-h100-80gb",
    "H100-MEGA": "nvidia-h100-mega-80gb",
    "H200": "nvidia-h200-141gb",
    "B200": "nvidia-b200",
}


def machine_family(machine_type: str) -> str:
    return machine_type.split("-", 1)[0].lower()


def accelerator_type(name: str) -> str:
    return _ACCELERATOR_TYPES.get(name.upper(), "nvidia-" + name.lower())


def gcp_program(spec: ClusterInfraSpec) -> None:
    """Declare the cluster's resources; exports the outputs `infra.stacks.StackOutputs` reads."""
    p = spec.prefix
    labels = to_gcp_labels(spec.tags)
    family = machine_family(spec.instance_type)
    has_gpu = spec.accelerator_count > 0 or family in GPU_BUILTIN_FAMILIES

    provider = gcp.Provider(
        f"{p}-gcp",
        project=spec.gcp_project,
        region=spec.region,
        zone=spec.zone,
        default_labels=labels,
    )
    opts = pulumi.ResourceOptions(provider=provider)

    network = gcp.compute.Network(f"{p}-net", name=f"{p}-net", auto_create_subnetworks=False, opts=opts)
    subnet = gcp.compute.Subnetwork(
        f"{p}-subnet", name=f"{p}-subnet", region=spec.region, network=network.id,
        ip_cidr_range=SUBNET_CIDR, opts=opts,
    )
    gcp.compute.Firewall(
        f"{p}-ssh", name=f"{p}-ssh", network=network.id, direction="INGRESS",
        allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
        source_ranges=[spec.ssh_allowed_cidr or MISSING_CIDR], target_tags=[p], opts=opts,
    )
    gcp.compute.Firewall(
        f"{p}-internal", name=f"{p}-internal", network=network.id, direction="INGRESS",
        allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
        source_tags=[p], target_tags=[p], opts=opts,
    )

    policy = None
    if spec.num_nodes > 1 and family in COMPACT_PLACEMENT_FAMILIES:
        policy = gcp.compute.ResourcePolicy(
            f"{p}-compact", name=f"{p}-compact", region=spec.region,
            group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                collocation="COLLOCATED", vm_count=spec.num_nodes,
            ),
            opts=opts,
        )

    if spec.spot:
        scheduling = gcp.compute.InstanceSchedulingArgs(
            provisioning_model="SPOT", preemptible=True, automatic_restart=False,
            instance_termination_action=spec.spot_termination_action,
            on_host_maintenance="TERMINATE",
        )
    else:
        scheduling = gcp.compute.InstanceSchedulingArgs(
            provisioning_model="STANDARD", preemptible=False, automatic_restart=True,
            on_host_maintenance="TERMINATE" if has_gpu else "MIGRATE",
        )
    accelerators = None
    if spec.accelerator and family not in GPU_BUILTIN_FAMILIES:
        accelerators = [gcp.compute.InstanceGuestAcceleratorArgs(
            type=accelerator_type(spec.accelerator), count=spec.accelerator_count,
        )]

    instances = []
    for rank in range(spec.num_nodes):
        name = f"{p}-node-{rank}"
        instances.append(
            gcp.compute.Instance(
                name,
                name=name,
                machine_type=spec.instance_type,
                zone=spec.zone,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    auto_delete=True,
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=spec.image_id or DEFAULT_IMAGE,
                        size=spec.disk_size_gib,
                        type=spec.disk_type or "pd-balanced",
                        labels=labels,
                    ),
                ),
                network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=subnet.id,
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
                )],
                scheduling=scheduling,
                guest_accelerators=accelerators,
                resource_policies=policy.self_link if policy else None,
                metadata={"ssh-keys": f"{spec.ssh_user}:{spec.ssh_public_key or MISSING_PUBLIC_KEY}"},
                tags=[p],
                labels={**labels, "node-rank": str(rank)},
                allow_stopping_for_update=True,
                opts=opts,
            )
        )

    bucket = None
    if spec.checkpoint_bucket:
        bucket = gcp.storage.Bucket(
            f"{p}-ckpt",
            name=spec.bucket_name,
            location=spec.region.upper(),
            uniform_bucket_level_access=True,
            force_destroy=spec.bucket_force_destroy,
            labels=labels,
            opts=pulumi.ResourceOptions(provider=provider, retain_on_delete=spec.retain_bucket_on_destroy),
        )

    pulumi.export("cloud", "gcp")
    pulumi.export("region", spec.region)
    pulumi.export("zone", spec.zone)
    pulumi.export("ssh_user", spec.ssh_user)
    pulumi.export("instance_ids", [i.instance_id for i in instances])
    pulumi.export("public_ips", [i.network_interfaces.apply(_nat_ip) for i in instances])
    pulumi.export("private_ips", [i.network_interfaces.apply(_network_ip) for i in instances])
    pulumi.export("bucket", bucket.name if bucket else None)


def _nat_ip(nics) -> str | None:
    if nics and nics[0].access_configs:
        return nics[0].access_configs[0].nat_ip
    return None


def _network_ip(nics) -> str | None:
    return nics[0].network_ip if nics else None
