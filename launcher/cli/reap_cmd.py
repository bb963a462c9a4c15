"""Commands: `launcher reap` (one pass) and `launcher reap schedule install|show|remove`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from launcher.cli.app import app

if TYPE_CHECKING:
    from launcher.ledger.interfaces import LedgerWriter

reap_app = typer.Typer(help="Find idle managed GPU machines and tear them down (mark, then act after a grace period).", invoke_without_command=True, no_args_is_help=False)
schedule_app = typer.Typer(help="Install, show or remove the nightly reap schedule (cron).", no_args_is_help=True)
reap_app.add_typer(schedule_app, name="schedule")
app.add_typer(reap_app, name="reap")


def _policy_path(policy: Path | None) -> Path | None:
    from launcher import paths

    if policy is not None:
        return policy
    default = paths.home() / "reap.yaml"
    return default if default.is_file() else None


def down_local_cluster(ledger: LedgerWriter, cluster: str) -> None:
    """`launcher down CLUSTER`: how the reaper ends a local cluster's run."""
    from launcher.controller.cleanup import down_target
    from launcher.providers import registry

    down_target(ledger, cluster, registry.get)


@reap_app.callback()
def reap(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would happen and why; change nothing."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON list: an object per instance considered."),
    project: str | None = typer.Option(None, "--project", help="Only instances of this project."),
    policy: Path | None = typer.Option(None, "--policy", help="Policy YAML (default: $LAUNCHER_HOME/reap.yaml, else built-in defaults)."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from launcher.cli.render import info, print_json, print_table
    from launcher.reaper.service import reap_once

    report = reap_once(_policy_path(policy), dry_run=dry_run, project=project, stop_local_cluster=down_local_cluster)
    if json_out:
        print_json([o.to_json() for o in report.outcomes])
    else:
        rows = [
            (o.provider, o.region, o.instance_id, o.project or "", o.decision, o.action or "",
             "" if o.hourly_price_usd is None else f"{o.hourly_price_usd:.3f}",
             "" if o.estimated_saving_usd is None else f"{o.estimated_saving_usd:.2f}",
             ("ERROR " + o.error + "; " if o.error else "") + "; ".join(o.reasons))
            for o in report.outcomes
        ]
        title = f"reap pass {report.pass_id}" + (" (dry run: nothing changed)" if report.dry_run else "")
        print_table(title, ["provider", "region", "instance", "project", "decision", "action", "$/h", "est. saving $", "why"], rows)
    for err in report.errors:
        info(f"warning: {err}")
    if any(not o.ok for o in report.outcomes) or report.errors:
        raise typer.Exit(5)


@schedule_app.command("install")
def schedule_install(
    at: str = typer.Option("03:17", "--at", help="Time of day HH:MM (local cron time)."),
    policy: Path | None = typer.Option(None, "--policy"),
    log: Path | None = typer.Option(None, "--log", help="Append the pass's JSON output to this file."),
) -> None:
    from launcher.cli.render import info
    from launcher.reaper import schedule

    sched = _parse_schedule(at, policy, log)
    line = schedule.install(sched)
    info(f"installed cron entry:\n  {line}")


@schedule_app.command("show")
def schedule_show(
    at: str = typer.Option("03:17", "--at"),
    policy: Path | None = typer.Option(None, "--policy"),
) -> None:
    import shutil

    from launcher.reaper import schedule

    sched = _parse_schedule(at, policy, None)
    current = schedule.installed_line() if shutil.which("crontab") else None
    typer.echo(f"installed cron entry: {current or '(none)'}\n")
    typer.echo(f"cron:\n{sched.cron_line()}\n")
    typer.echo(f"systemd:\n{sched.systemd_units()}")
    typer.echo(f"kubernetes:\n{sched.kubernetes_cronjob()}")


@schedule_app.command("remove")
def schedule_remove() -> None:
    from launcher.reaper import schedule

    typer.echo("removed" if schedule.remove() else "no gpu-launcher entry was installed")


def _parse_schedule(at: str, policy: Path | None, log: Path | None):
    from launcher.errors import BadInputError
    from launcher.reaper.schedule import Schedule, validate_time

    try:
        hour_s, minute_s = at.split(":")
        hour, minute = int(hour_s), int(minute_s)
    except ValueError:
        raise BadInputError(f"--at must be HH:MM, got {at!r}") from None
    validate_time(hour, minute)
    from launcher import paths

    return Schedule(minute=minute, hour=hour, policy_path=str(policy.resolve()) if policy else None,
                    log_path=str(log) if log else None, home=str(paths.home().resolve()))
