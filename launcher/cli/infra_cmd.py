"""Commands: `launcher infra preview|up|destroy|list` (one Pulumi stack per cluster).

Light at import: Pulumi and the infra programs load inside the commands. Without the Pulumi CLI,
`preview`, `up` and `destroy` fail with one install hint (exit 5) before anything is written;
`preview --dry-run` computes the full resource plan from the program under Pulumi's mocks, and
`list` reads a file backend's directory, both without the CLI.
"""

from __future__ import annotations

from pathlib import Path

import typer

from launcher.cli.app import app
from launcher.errors import BadInputError, UnknownNameError

infra_app = typer.Typer(
    help="Pulumi stacks per cluster: preview (or --dry-run plan), up, destroy, list.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(infra_app, name="infra")

CLOUDS = ("aws", "gcp")

# Options shared by preview and up (typer reads these OptionInfo defaults; they are not mutated).
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
_JSON = typer.Option(False, "--json", help="Print JSON.")


def _parse_gpus(value: str | None) -> tuple[str | None, int]:
    if not value or value.lower() == "none":
        return None, 0
    name, _, count = value.partition(":")
    if not name.strip():
        raise BadInputError(f"--gpus {value!r}: expected NAME[:COUNT], e.g. V100:1")
    try:
        n = int(count) if count else 1
    except ValueError:
        raise BadInputError(f"--gpus {value!r}: COUNT must be a whole number") from None
    if n < 1:
        raise BadInputError(f"--gpus {value!r}: COUNT must be >= 1")
    return name.strip(), n


def _spec_from_flags(*, cloud, region, zone, instance_type, gpus, num_nodes, spot, project, experiment,
                     owner, cost_center, cluster, run_id, ttl_hours, ssh_cidr, ssh_public_key, disk_gib,
                     image_id, gcp_project, aws_endpoint, bucket, bucket_name):
    from datetime import UTC, datetime

    from infra.spec import AwsProviderSettings, ClusterInfraSpec, read_public_key
    from infra.tags import TagInput, build_tags

    if cloud not in CLOUDS:
        raise UnknownNameError("cloud", cloud, CLOUDS, extra=" for infra (Pulumi programs exist for aws and gcp)")
    now = datetime.now(UTC)
    tags = build_tags(
        TagInput(
            project=project, experiment=experiment, owner=owner, cost_center=cost_center,
            run_id=run_id or f"manual-{now.strftime('%Y%m%dt%H%M%S')}", cluster=cluster, ttl_hours=ttl_hours,
        ),
        now=now,
    )
    accelerator, count = _parse_gpus(gpus)
    extra = {}
    if aws_endpoint:
        if cloud != "aws":
            raise BadInputError("--aws-endpoint only applies to --cloud aws")
        extra["aws"] = AwsProviderSettings.for_endpoint(aws_endpoint)
    return ClusterInfraSpec.build(
        cloud=cloud, project=tags["project"], cluster=tags["cluster"], region=region, zone=zone,
        instance_type=instance_type, accelerator=accelerator, accelerator_count=count, num_nodes=num_nodes,
        spot=spot, tags=tags, ssh_allowed_cidr=ssh_cidr, ssh_public_key=read_public_key(ssh_public_key),
        disk_size_gib=disk_gib, image_id=image_id, gcp_project=gcp_project, checkpoint_bucket=bucket,
        checkpoint_bucket_name=bucket_name, **extra,
    )


def print_resource_plan(spec, plan) -> None:
    """Human rendering of a resource plan (also used by `launch --dry-run`)."""
    from infra.tags import to_gcp_labels
    from launcher.cli.render import info, print_table

    info(f"Pulumi stack {spec.stack_name} (project gpu-launcher), {spec.cloud} {spec.region}"
         f"{'/' + spec.zone if spec.zone else ''}, {spec.num_nodes} x {spec.instance_type} "
         f"{'spot' if spec.spot else 'on-demand'}; computed from the program under Pulumi mocks (nothing deployed)")
    n_tags = len(spec.tags)
    want = to_gcp_labels(spec.tags) if spec.cloud == "gcp" else spec.tags
    rows = []
    for i, r in enumerate(plan, 1):
        if r.tags is None:
            tagged = "-"
        else:
            tagged = f"all {n_tags}" if want.items() <= r.tags.items() else "MISSING"
        rows.append((i, r.type, r.name, "yes" if r.billable else "", tagged, r.summary()))
    print_table("resource plan", ["#", "type", "name", "billable", "tags", "key inputs"], rows)
    labels = to_gcp_labels(spec.tags) if spec.cloud == "gcp" else None
    cols = ["tag", "value"] + (["gcp label"] if labels is not None else [])
    trows = []
    for k, v in spec.tags.items():
        row = [k, v]
        if labels is not None:
            from infra.tags import gcp_label_key

            lk = gcp_label_key(k)
            row.append(f"{lk}={labels[lk]}")
        trows.append(row)
    print_table("tags on every billable resource", cols, trows)


@infra_app.command("preview")
def preview_cmd(
    cloud: str = _CLOUD, region: str = _REGION, zone: str | None = _ZONE, instance_type: str = _ITYPE,
    gpus: str | None = _GPUS, num_nodes: int = _NODES, spot: bool = _SPOT, project: str | None = _PROJECT,
    experiment: str | None = _EXPERIMENT, owner: str | None = _OWNER, cost_center: str | None = _COST_CENTER,
    cluster: str | None = _CLUSTER, run_id: str | None = _RUN_ID, ttl_hours: float = _TTL,
    ssh_cidr: str | None = _CIDR, ssh_public_key: Path | None = _PUBKEY, disk_gib: int = _DISK,
    image_id: str | None = _IMAGE, gcp_project: str | None = _GCP_PROJECT, aws_endpoint: str | None = _AWS_ENDPOINT,
    bucket: bool = _BUCKET, bucket_name: str | None = _BUCKET_NAME,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resource plan from the program; no CLI, no cloud."),
    as_json: bool = _JSON,
) -> None:
    """Show what `up` would create: `--dry-run` from the program alone, else `pulumi preview`."""
    from infra.cli_check import require_pulumi

    from launcher.cli.app import GLOBALS
    from launcher.cli.infra_checks import check_flags

    check_flags(cloud=cloud, region=region, zone=zone, instance_type=instance_type, gpus=_parse_gpus(gpus),
                catalog_dir=GLOBALS.catalog_dir)  # fmt: skip
    if not dry_run:
        require_pulumi("launcher infra preview")
    spec = _spec_from_flags(**_spec_args(locals()))
    if dry_run:
        from infra.plan import plan_document, resource_plan
        from launcher.cli.render import print_json

        plan = resource_plan(spec)
        if as_json:
            print_json(plan_document(spec, plan))
        else:
            print_resource_plan(spec, plan)
        return
    from infra import stacks
    from launcher.cli.render import info, print_json

    result = stacks.preview(spec, on_output=None if as_json else info)
    if as_json:
        print_json({"stack": result.stack, "changes": result.changes})


@infra_app.command("up")
def up_cmd(
    cloud: str = _CLOUD, region: str = _REGION, zone: str | None = _ZONE, instance_type: str = _ITYPE,
    gpus: str | None = _GPUS, num_nodes: int = _NODES, spot: bool = _SPOT, project: str | None = _PROJECT,
    experiment: str | None = _EXPERIMENT, owner: str | None = _OWNER, cost_center: str | None = _COST_CENTER,
    cluster: str | None = _CLUSTER, run_id: str | None = _RUN_ID, ttl_hours: float = _TTL,
    ssh_cidr: str | None = _CIDR, ssh_public_key: Path | None = _PUBKEY, disk_gib: int = _DISK,
    image_id: str | None = _IMAGE, gcp_project: str | None = _GCP_PROJECT, aws_endpoint: str | None = _AWS_ENDPOINT,
    bucket: bool = _BUCKET, bucket_name: str | None = _BUCKET_NAME, as_json: bool = _JSON,
) -> None:
    """Create or update the cluster's stack (needs the Pulumi CLI and cloud credentials)."""
    from infra.cli_check import require_pulumi

    require_pulumi("launcher infra up")
    spec = _spec_from_flags(**_spec_args(locals()))
    from dataclasses import asdict

    from infra import stacks
    from launcher.cli.render import info, print_json, print_table

    out = stacks.up(spec, on_output=None if as_json else info)
    if as_json:
        print_json(asdict(out))
        return
    rows = [(i, iid, out.public_ips[i] if i < len(out.public_ips) else None,
             out.private_ips[i] if i < len(out.private_ips) else None) for i, iid in enumerate(out.instance_ids)]
    print_table(f"stack {out.stack}: {out.cloud} {out.region} bucket={out.bucket}",
                ["rank", "instance", "public ip", "private ip"], rows)


@infra_app.command("destroy")
def destroy_cmd(
    project: str = typer.Option(..., "--project"),
    cluster: str = typer.Option(..., "--cluster"),
    as_json: bool = _JSON,
) -> None:
    """Destroy the cluster's resources and remove its stack (already gone = success)."""
    from infra import naming, stacks
    from launcher.cli.render import info, print_json

    destroyed = stacks.destroy(project, cluster, on_output=None if as_json else info)
    name = naming.stack_name(project, cluster)
    if as_json:
        print_json({"stack": name, "destroyed": destroyed})
    else:
        info(f"stack {name}: " + ("destroyed" if destroyed else "not found; nothing to destroy"))


@infra_app.command("list")
def list_cmd(as_json: bool = _JSON) -> None:
    """Stacks in the state backend (a file backend is read directly, without the Pulumi CLI)."""
    from dataclasses import asdict

    from infra import stacks
    from launcher.cli.render import print_json, print_table

    found = stacks.list_stacks()
    if as_json:
        print_json([asdict(s) for s in found])
        return
    print_table(f"stacks in {stacks.backend_url()}", ["stack", "project", "cluster", "last update", "resources"],
                [(s.name, s.project, s.cluster, s.last_update, s.resource_count) for s in found])


def _spec_args(scope: dict) -> dict:
    names = ("cloud", "region", "zone", "instance_type", "gpus", "num_nodes", "spot", "project", "experiment",
             "owner", "cost_center", "cluster", "run_id", "ttl_hours", "ssh_cidr", "ssh_public_key", "disk_gib",
             "image_id", "gcp_project", "aws_endpoint", "bucket", "bucket_name")
    return {n: scope[n] for n in names}
