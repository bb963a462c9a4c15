"""Cluster lifecycle for providers whose clusters are Pulumi stacks (aws, gcp): infra/ owns the
resources; the provider only translates: its request into infra's spec, infra's stack outputs
into a ClusterHandle, infra's errors into the launcher's. infra is imported lazily."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from launcher import paths
from launcher.errors import ProviderError, as_launcher_error
from launcher.providers.base import ClusterHandle, ClusterRequest, Node

T = TypeVar("T")


def _translated(call: Callable[[], T]) -> T:
    """Run an infra call; its errors become LauncherErrors of the same kind (the controller
    tells a missing tool or bad input, which fail every offer of a cloud, from a failed call)."""
    from infra.errors import InfraError

    try:
        return call()
    except InfraError as e:
        raise as_launcher_error(e) from e


def handle_from_outputs(outputs, cluster: str) -> ClusterHandle:
    """infra's StackOutputs -> the handle executors use (node rank = instance order)."""
    nodes = tuple(
        Node(instance_id=iid, ip=(outputs.public_ips[i] if i < len(outputs.public_ips) else None), rank=i)
        for i, iid in enumerate(outputs.instance_ids)
    )
    extra = {"ssh_user": outputs.ssh_user}
    if outputs.bucket:
        extra["bucket"] = outputs.bucket
    return ClusterHandle(
        cluster=cluster, provider=outputs.cloud, region=outputs.region, zone=outputs.zone,
        nodes=nodes, stack=outputs.stack, extra=extra,
    )  # fmt: skip


def _infra():
    try:
        from infra import naming, spec, stacks
    except ImportError as e:  # pulumi SDKs not installed
        raise ProviderError(
            "cluster provisioning needs the Pulumi programs in infra/ and the Pulumi SDK",
            hint="pip install 'gpu-launcher[pulumi]' and install the Pulumi CLI",
        ) from e
    return naming, spec, stacks


def infra_spec_for(request: ClusterRequest, *, env=None, **overrides):
    """The ClusterInfraSpec a request becomes: the one builder shared by `provision` and by
    `launch --dry-run`'s resource plan, so what the dry run shows is what `up` deploys.

    From the environment: AWS_ENDPOINT_URL points the Pulumi AWS provider at the same endpoint
    boto3 uses (e.g. moto_server), so a test never reaches real AWS; the GCP project from the
    provider's usual variables unless given."""
    import os

    _naming, spec_mod, _stacks = _infra()
    env = os.environ if env is None else env
    fields = dict(overrides)
    if request.disk_size_gib:
        fields["disk_size_gib"] = request.disk_size_gib
    if request.offer.cloud == "aws" and env.get("AWS_ENDPOINT_URL") and "aws" not in fields:
        fields["aws"] = spec_mod.AwsProviderSettings.for_endpoint(env["AWS_ENDPOINT_URL"])
    if request.offer.cloud == "gcp" and "gcp_project" not in fields:
        from launcher.providers.gcp_project import project_from_env

        project = project_from_env(env)
        if project:
            fields["gcp_project"] = project
    return _translated(
        lambda: spec_mod.ClusterInfraSpec.from_offer(
            request.offer,
            num_nodes=request.num_nodes,
            tags=request.tags,
            ssh_public_key=spec_mod.read_public_key(None),
            ssh_allowed_cidr=request.ssh_allowed_cidr,
            **fields,
        )
    )


def provision_stack(request: ClusterRequest, **overrides) -> ClusterHandle:
    """`pulumi up` the cluster's stack and return its handle. Refuses (BadInputError) without an
    SSH key or allowed CIDR, and (ToolMissingError) without the Pulumi CLI, before creating
    anything. `request.image_id` is the job's container image, not a VM image, so it is not
    passed to the stack (the VM gets infra's default deep-learning image)."""
    _naming, _spec_mod, stacks = _infra()
    spec = infra_spec_for(request, **overrides)
    _translated(spec.require_deployable)
    handle = handle_from_outputs(_translated(lambda: stacks.up(spec, state_home=paths.home())), request.cluster)
    extra = {**handle.extra, "project": spec.project}
    if request.offer.accelerator:
        extra["accelerator"] = request.offer.accelerator
    return ClusterHandle(handle.cluster, handle.provider, handle.region, handle.zone, handle.nodes, handle.stack, extra)


def destroy_stack(handle: ClusterHandle) -> None:
    """`pulumi destroy` the cluster's stack; idempotent (no stack = success)."""
    naming, _spec, stacks = _infra()
    project = handle.extra.get("project") or naming.parse_stack_name(handle.stack)[0]
    _translated(lambda: stacks.destroy(project, handle.cluster, state_home=paths.home()))
