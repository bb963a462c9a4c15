"""Commands: `launcher infra preview|up|destroy|list` (one Pulumi stack per cluster).

Light at import: Pulumi and the infra programs load inside the commands. Without the Pulumi CLI,
`preview`, `up` and `destroy` fail with one install hint (exit 5) before anything is written;
`preview --dry-run` computes the full resource plan from the program under Pulumi's mocks, and
`list` reads a file backend's directory, both without the CLI.
"""

from __future__ import annotations

import typer

from launcher.cli.app import app
from launcher.cli.infra_options import ClusterOptions, with_cluster_options

infra_app = typer.Typer(
    help="Pulumi stacks per cluster: preview (or --dry-run plan), up, destroy, list.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(infra_app, name="infra")

_JSON = typer.Option(False, "--json", help="Print JSON.")


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
@with_cluster_options
def preview_cmd(
    opts: ClusterOptions,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resource plan from the program; no CLI, no cloud."),
    as_json: bool = _JSON,
) -> None:
    """Show what `up` would create: `--dry-run` from the program alone, else `pulumi preview`."""
    from launcher.cli.app import GLOBALS
    from launcher.planning.infra_checks import check_flags, parse_cluster_gpus

    check_flags(cloud=opts.cloud, region=opts.region, zone=opts.zone, instance_type=opts.instance_type,
                gpus=parse_cluster_gpus(opts.gpus), catalog_dir=GLOBALS.catalog_dir)  # fmt: skip
    from launcher.providers import stacks

    if not dry_run:
        stacks.require_pulumi("launcher infra preview")
    spec = opts.to_spec()
    if dry_run:
        from launcher.cli.render import print_json

        plan = stacks.resource_plan(spec)
        if as_json:
            print_json(stacks.plan_document(spec, plan))
        else:
            print_resource_plan(spec, plan)
        return
    from launcher.cli.render import info, print_json

    result = stacks.preview(spec, on_output=None if as_json else info)
    if as_json:
        print_json({"stack": result.stack, "changes": result.changes})


@infra_app.command("up")
@with_cluster_options
def up_cmd(opts: ClusterOptions, as_json: bool = _JSON) -> None:
    """Create or update the cluster's stack (needs the Pulumi CLI and cloud credentials)."""
    from launcher.providers import stacks

    stacks.require_pulumi("launcher infra up")
    spec = opts.to_spec()
    from dataclasses import asdict

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
    from launcher.cli.render import info, print_json
    from launcher.providers import stacks

    destroyed = stacks.destroy(project, cluster, on_output=None if as_json else info)
    name = stacks.stack_name(project, cluster)
    if as_json:
        print_json({"stack": name, "destroyed": destroyed})
    else:
        info(f"stack {name}: " + ("destroyed" if destroyed else "not found; nothing to destroy"))


@infra_app.command("list")
def list_cmd(as_json: bool = _JSON) -> None:
    """Stacks in the state backend (a file backend is read directly, without the Pulumi CLI)."""
    from dataclasses import asdict

    from launcher.cli.render import print_json, print_table
    from launcher.providers import stacks

    found = stacks.list_stacks()
    if as_json:
        print_json([asdict(s) for s in found])
        return
    print_table(f"stacks in {stacks.backend_url()}", ["stack", "project", "cluster", "last update", "resources"],
                [(s.name, s.project, s.cluster, s.last_update, s.resource_count) for s in found])
