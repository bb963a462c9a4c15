"""The options `launcher infra preview` and `infra up` share, declared once: `ClusterOptions`
(one frozen value) and `with_cluster_options`, which gives a command these options plus its own."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import typer

from launcher.errors import BadInputError

_CLOUD = typer.Option(..., "--cloud", help="aws or gcp.")
_REGION = typer.Option(..., "--region")
_ZONE = typer.Option(None, "--zone", help="Zone (required for gcp).")
_ITYPE = typer.Option(..., "--instance-type", help="e.g. p3.2xlarge, n1-standard-8, a2-highgpu-1g.")
_GPUS = typer.Option(None, "--gpus", help="Accelerator NAME[:COUNT] per node, e.g. V100:1.")
_NODES = typer.Option(1, "--num-nodes", min=1, max=64)
_SPOT = typer.Option(True, "--spot/--on-demand", help="Spot (default) or on-demand capacity.")
_PROJECT = typer.Option(None, "--project", help="Tag: project (with --cluster it names the stack).")
_EXPERIMENT = typer.Option(None, "--experiment", help="Tag: experiment.")
_OWNER = typer.Option(None, "--owner", help="Tag: owner.")
_COST_CENTER = typer.Option(None, "--cost-center", help="Tag: cost-center.")
_CLUSTER = typer.Option(None, "--cluster", help="Tag: cluster (unique per project).")
_RUN_ID = typer.Option(None, "--run-id", help="Tag: run-id (default: manual-<UTC time>).")
_TTL = typer.Option(24.0, "--ttl-hours", help="Tag expires-at = created-at + this.")
_CIDR = typer.Option(None, "--ssh-cidr", help="The only network allowed to SSH in, e.g. 203.0.113.7/32.")
_PUBKEY = typer.Option(None, "--ssh-public-key", help="Public key file (default ~/.ssh/id_ed25519.pub or id_rsa.pub).")
_DISK = typer.Option(200, "--disk-gib", min=10, help="Root/boot disk size per node.")
_IMAGE = typer.Option(None, "--image-id", help="AMI / GCE image (default: a deep-learning image).")
_GCP_PROJECT = typer.Option(None, "--gcp-project", envvar="GOOGLE_CLOUD_PROJECT", help="GCP project id.")
_AWS_ENDPOINT = typer.Option(None, "--aws-endpoint", help="One endpoint for all AWS services (e.g. moto_server).")
_BUCKET = typer.Option(True, "--bucket/--no-bucket", help="Create the checkpoint bucket.")
_BUCKET_NAME = typer.Option(None, "--bucket-name", help="Checkpoint bucket name (default <project>-<cluster>-ckpt-<hash>).")


@dataclass(frozen=True)
class ClusterOptions:
    """One cluster's stack as the flags describe it."""

    cloud: str
    region: str
    instance_type: str
    zone: str | None = None
    gpus: str | None = None
    num_nodes: int = 1
    spot: bool = True
    project: str | None = None
    experiment: str | None = None
    owner: str | None = None
    cost_center: str | None = None
    cluster: str | None = None
    run_id: str | None = None
    ttl_hours: float = 24.0
    ssh_cidr: str | None = None
    ssh_public_key: Path | None = None
    disk_gib: int = 200
    image_id: str | None = None
    gcp_project: str | None = None
    aws_endpoint: str | None = None
    bucket: bool = True
    bucket_name: str | None = None

    def to_spec(self):
        """The ClusterInfraSpec (infra.spec) these options describe; refuses bad input (exit 2)."""
        return _spec_from_options(self)


# (flag parameter, its type, its typer option), in the order `--help` lists them.
_PARAMS: tuple[tuple[str, object, object], ...] = (
    ("cloud", str, _CLOUD), ("region", str, _REGION), ("zone", str | None, _ZONE),
    ("instance_type", str, _ITYPE), ("gpus", str | None, _GPUS), ("num_nodes", int, _NODES), ("spot", bool, _SPOT),
    ("project", str | None, _PROJECT), ("experiment", str | None, _EXPERIMENT), ("owner", str | None, _OWNER),
    ("cost_center", str | None, _COST_CENTER), ("cluster", str | None, _CLUSTER), ("run_id", str | None, _RUN_ID),
    ("ttl_hours", float, _TTL), ("ssh_cidr", str | None, _CIDR), ("ssh_public_key", Path | None, _PUBKEY),
    ("disk_gib", int, _DISK), ("image_id", str | None, _IMAGE), ("gcp_project", str | None, _GCP_PROJECT),
    ("aws_endpoint", str | None, _AWS_ENDPOINT), ("bucket", bool, _BUCKET), ("bucket_name", str | None, _BUCKET_NAME),
)  # fmt: skip
assert {p[0] for p in _PARAMS} == {f.name for f in fields(ClusterOptions)}


def with_cluster_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command(opts: ClusterOptions, **own)` as a typer command taking the cluster options and its own."""
    own = [p for name, p in inspect.signature(command, eval_str=True).parameters.items() if name != "opts"]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
        for name, kind, option in _PARAMS
    ]
    names = [p[0] for p in _PARAMS]

    @functools.wraps(command)
    def wrapper(**kwargs):
        opts = ClusterOptions(**{n: kwargs.pop(n) for n in names})
        return command(opts, **kwargs)

    params = shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapper.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # typer must see the combined signature, not the command's
    return wrapper


def _spec_from_options(o: ClusterOptions):
    cloud, region, zone, instance_type, gpus, num_nodes, spot = (
        o.cloud, o.region, o.zone, o.instance_type, o.gpus, o.num_nodes, o.spot
    )
    project, experiment, owner, cost_center, cluster, run_id, ttl_hours = (
        o.project, o.experiment, o.owner, o.cost_center, o.cluster, o.run_id, o.ttl_hours
    )
    ssh_cidr, ssh_public_key, disk_gib, image_id = o.ssh_cidr, o.ssh_public_key, o.disk_gib, o.image_id
    gcp_project, aws_endpoint, bucket, bucket_name = o.gcp_project, o.aws_endpoint, o.bucket, o.bucket_name
    from datetime import UTC, datetime

    from infra.tags import TagInput, build_tags
    from launcher.providers.stacks import cluster_spec, ssh_public_key as read_public_key

    from launcher.planning.infra_checks import check_cloud

    check_cloud(cloud)
    now = datetime.now(UTC)
    tags = build_tags(
        TagInput(
            project=project, experiment=experiment, owner=owner, cost_center=cost_center,
            run_id=run_id or f"manual-{now.strftime('%Y%m%dt%H%M%S')}", cluster=cluster, ttl_hours=ttl_hours,
        ),
        now=now,
    )
    from launcher.planning.infra_checks import parse_cluster_gpus

    accelerator, count = parse_cluster_gpus(gpus)
    if aws_endpoint and cloud != "aws":
        raise BadInputError("--aws-endpoint only applies to --cloud aws")
    return cluster_spec(
        aws_endpoint=aws_endpoint,
        cloud=cloud, project=tags["project"], cluster=tags["cluster"], region=region, zone=zone,
        instance_type=instance_type, accelerator=accelerator, accelerator_count=count, num_nodes=num_nodes,
        spot=spot, tags=tags, ssh_allowed_cidr=ssh_cidr, ssh_public_key=read_public_key(ssh_public_key),
        disk_size_gib=disk_gib, image_id=image_id, gcp_project=gcp_project, checkpoint_bucket=bucket,
        checkpoint_bucket_name=bucket_name,
    )


