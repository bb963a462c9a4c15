"""`launcher infra server preview|up|destroy`: deploy the team server (VMs running `launcher
server`, a managed PostgreSQL ledger, the nightly reaper), tagged managed-by=gpu-launcher."""

from __future__ import annotations

import typer

from launcher.cli.infra_cmd import infra_app

server_infra_app = typer.Typer(help="The team server's stack: replicas, managed PostgreSQL, nightly reaper.", no_args_is_help=True)
infra_app.add_typer(server_infra_app, name="server")

_REGION = typer.Option("us-east-1", "--region")
_PROJECT = typer.Option("platform", "--project", help="Project tag and stack name prefix.")
_REPLICAS = typer.Option(2, "--replicas", help="Server VMs (each a replica).")
_CIDR = typer.Option(..., "--api-cidr", help="Network allowed to reach the API, e.g. your VPN's 10.8.0.0/16.")
_REAP = typer.Option("17 3 * * *", "--reaper-schedule", help="Cron schedule (UTC) of the nightly `launcher reap`.")


def _spec(region: str, project: str, replicas: int, api_cidr: str, reaper_schedule: str):
    from launcher.errors import BadInputError
    from launcher.providers.server_stack import server_spec

    try:
        return server_spec(region=region, project=project, replicas=replicas, api_cidr=api_cidr, reaper_schedule=reaper_schedule)
    except ValueError as e:
        raise BadInputError(str(e)) from None


@server_infra_app.command("preview")
def preview(
    region: str = _REGION, project: str = _PROJECT, replicas: int = _REPLICAS, api_cidr: str = _CIDR, reaper_schedule: str = _REAP,
    dry_run: bool = typer.Option(False, "--dry-run", help="List the resources from the program alone; no CLI, no cloud."),
) -> None:
    """What `up` would create (`--dry-run`: from the program; else `pulumi preview`)."""
    from launcher.cli.render import info, print_table
    from launcher.providers import server_stack

    spec = _spec(region, project, replicas, api_cidr, reaper_schedule)
    if dry_run:
        rows = server_stack.resource_rows(spec)
        print_table(f"stack {spec.stack_name} ({spec.region})", ["TYPE", "NAME", "MANAGED-BY", "PROJECT"],
                    [[r["type"], r["name"], r["managed_by"] or "", r["project"] or ""] for r in rows])  # fmt: skip
        return
    changes = server_stack.preview(spec, info)
    info(f"stack {spec.stack_name}: " + ", ".join(f"{k} {v}" for k, v in sorted(changes.items())))


@server_infra_app.command("up")
def up(region: str = _REGION, project: str = _PROJECT, replicas: int = _REPLICAS, api_cidr: str = _CIDR, reaper_schedule: str = _REAP) -> None:
    """Create or update the server's stack (needs the Pulumi CLI and AWS credentials)."""
    from launcher.cli.render import info
    from launcher.providers import server_stack

    out = server_stack.up(_spec(region, project, replicas, api_cidr, reaper_schedule), info)
    info(f"server URLs: {', '.join(out.get('server_urls') or [])}; ledger: {out.get('ledger_endpoint')}")


@server_infra_app.command("destroy")
def destroy(region: str = _REGION, project: str = _PROJECT) -> None:
    """Destroy the server's stack (the database keeps a final snapshot)."""
    from launcher.cli.render import info
    from launcher.providers import server_stack

    spec = _spec(region, project, 1, "10.0.0.0/8", "17 3 * * *")
    server_stack.destroy(spec, info)
    info(f"stack {spec.stack_name} destroyed")
