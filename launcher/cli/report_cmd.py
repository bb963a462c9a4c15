"""Commands: `launcher report` (cost by experiment/project/... from the ledger),
`launcher report reconcile` (ledger vs cloud bill) and `launcher budget status`."""

from __future__ import annotations

from pathlib import Path

import typer

from launcher.cli.app import app

report_app = typer.Typer(
    help="Cost from the ledger grouped by experiment, project, owner, cost center, cloud, day or month (FOCUS columns).",
    invoke_without_command=True,
    no_args_is_help=False,
)
budget_app = typer.Typer(help="Budgets per project/owner ($LAUNCHER_HOME/budgets.yaml).", no_args_is_help=True)
app.add_typer(report_app, name="report")
app.add_typer(budget_app, name="budget")


def _as_of(value: str | None):
    from datetime import UTC, datetime

    from launcher.report.periods import parse_time

    return parse_time(value, flag="--as-of") if value else datetime.now(UTC)


def _pick_format(fmt: str | None, output: Path | None, json_out: bool) -> str:
    from launcher.errors import BadInputError
    from launcher.report.formats import check_format, format_for_output

    if json_out:
        if fmt not in (None, "json"):
            raise BadInputError("--json conflicts with --format " + fmt)
        fmt = "json"
    if fmt is None:
        fmt = format_for_output(output) if output is not None else "table"
    fmt = check_format(fmt, output)
    if fmt == "table" and output is not None:
        raise BadInputError("--format table prints to the terminal", hint="use csv, parquet, json or html with --output")
    return fmt


@report_app.callback()
def report(
    ctx: typer.Context,
    by: str = typer.Option("experiment", "--by", help="experiment|project|owner|cost-center|cloud|region|run|attempt|day|month; combine with commas, e.g. project,day."),
    since: str | None = typer.Option(None, "--since", help="Start, YYYY-MM-DD or ISO-8601 time (UTC)."),
    until: str | None = typer.Option(None, "--until", help="End: a date includes that day; a time is exclusive."),
    month: str | None = typer.Option(None, "--month", help="A calendar month YYYY-MM (instead of --since/--until)."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="table|csv|parquet|json|html (default: table, or from --output's suffix)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write to FILE (atomically) instead of stdout."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    as_of: str | None = typer.Option(None, "--as-of", help="Count open attempts up to this time (default: now)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Read every attempt of the ledger instead of its cost rollup and the incremental report cache."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    import sys

    from launcher.cli.render import info, print_table
    from launcher.ledger import Ledger
    from launcher.report import ReportQuery
    from launcher.report.build import HTML_KEYS, parse_by
    from launcher.report.rollup_report import build_grouped_report
    from launcher.report.formats import display_frame, render, write
    from launcher.report.periods import parse_window

    # every flag is checked before the ledger is opened
    keys = parse_by(by)
    window = parse_window(since, until, month)
    kind = _pick_format(fmt, output, json_out)
    now = _as_of(as_of)
    with Ledger() as led:
        extra = HTML_KEYS if kind == "html" else ()
        if keys == ("attempt",) and kind != "html":  # per attempt: the FOCUS dataset (one row per charge)
            from launcher.report.focus_dataset import build_focus

            result = build_focus(led, ReportQuery(by=keys, window=window), now=now)
        else:
            result = build_grouped_report(
                led, ReportQuery(by=keys, window=window), now=now, extra_keys=extra, use_cache=not no_cache, use_rollup=not no_cache
            )
    if output is not None:
        size = write(result, kind, output)
        info(f"wrote {len(result.frame)} rows ({size:,} bytes, {kind}) to {output}")
        return
    if kind == "table":
        shown = display_frame(result.frame)
        rows = [list(r) for r in shown.itertuples(index=False)]
        t = result.totals()
        if rows:
            total = ["TOTAL"] + [""] * (len(shown.columns) - 1)
            from launcher.money import usd

            for i, c in enumerate(shown.columns):
                if c in t and i > 0:
                    total[i] = usd(t[c]) if "Cost" in c or c == "x_SpotSavings" else f"{t[c]:,.1f}" if c.endswith("Hours") else str(int(t[c]))
            rows.append(total)
        w = result.window
        print_table(f"cost by {','.join(keys)}, {w.since:%Y-%m-%d %H:%M} to {w.until:%Y-%m-%d %H:%M} UTC (USD)", list(shown.columns), rows)
        if not rows:
            info("no attempts in this period")
        return
    sys.stdout.buffer.write(render(result, kind))
    sys.stdout.flush()


@report_app.command("focus")
def focus_cmd(
    output: Path = typer.Option(..., "--output", "-o", help="The FOCUS file: .csv or .parquet."),
    month: str | None = typer.Option(None, "--month", help="A calendar month YYYY-MM (default: everything)."),
    since: str | None = typer.Option(None, "--since", help="Start, YYYY-MM-DD or ISO-8601 time (UTC)."),
    until: str | None = typer.Option(None, "--until", help="End: a date includes that day; a time is exclusive."),
    account: list[str] = typer.Option([], "--account", help="CLOUD=ID[:NAME], the billing account of a cloud's charges (repeatable); default: the account recorded with each attempt (AWS account, GCP project), else a stable id per ledger and cloud."),
    as_of: str | None = typer.Option(None, "--as-of", help="Count open attempts up to this time (default: now)."),
) -> None:
    """Write a FOCUS 1.2 cost-and-usage dataset (one row per charge: compute per attempt and
    month, checkpoint storage per run and month), checked by the FinOps Foundation's validator."""
    from launcher.cli.render import info
    from launcher.errors import BadInputError
    from launcher.ledger import Ledger
    from launcher.report import ReportQuery
    from launcher.report.focus_dataset import BillingAccount, build_focus
    from launcher.report.formats import format_for_output, write
    from launcher.report.periods import parse_window

    window = parse_window(since, until, month)
    kind = format_for_output(output)
    if kind not in ("csv", "parquet"):
        raise BadInputError(f"--output {output}: a FOCUS file is .csv or .parquet")
    accounts = {}
    for item in account:
        cloud, sep, rest = item.partition("=")
        if not sep or not cloud or not rest:
            raise BadInputError(f"--account {item!r}: expected CLOUD=ID or CLOUD=ID:NAME, e.g. aws=123456789012")
        acct_id, _, name = rest.partition(":")
        accounts[cloud.strip().lower()] = BillingAccount(id=acct_id, name=name or acct_id)
    now = _as_of(as_of)
    with Ledger() as led:
        result = build_focus(led, ReportQuery(by=("attempt",), window=window), now=now, accounts=accounts)
    size = write(result, kind, output)
    info(f"wrote {len(result.frame)} FOCUS rows ({size:,} bytes, {kind}) to {output}")


@report_app.command("reconcile")
def reconcile_cmd(
    month: str = typer.Option(..., "--month", help="The billing month YYYY-MM."),
    aws: bool = typer.Option(False, "--aws", help="Compare with AWS Cost Explorer (grouped by the experiment tag)."),
    gcp_export: Path | None = typer.Option(None, "--gcp-export", help="GCP billing export rows (BigQuery schema) as JSON lines or CSV."),
    tolerance_pct: float = typer.Option(1.0, "--tolerance-pct", help="Differences within this percentage count as ok."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    as_of: str | None = typer.Option(None, "--as-of", help="Count open attempts up to this time (default: now)."),
) -> None:
    """Compare the ledger's cost per experiment with the cloud bill (AWS Cost Explorer by the
    `experiment` tag, a GCP billing export by the `experiment` label)."""
    from launcher.cli.render import info, print_json, print_table
    from launcher.errors import BadInputError
    from launcher.ledger import Ledger
    from launcher.report.periods import month_window
    from launcher.report.reconcile import reconcile

    window = month_window(month)
    if not aws and gcp_export is None:
        raise BadInputError("nothing to reconcile against", hint="pass --aws and/or --gcp-export FILE")
    if gcp_export is not None and not gcp_export.is_file():
        raise BadInputError(f"GCP billing export {gcp_export} does not exist")
    if tolerance_pct < 0:
        raise BadInputError("--tolerance-pct must not be negative")
    now = _as_of(as_of)
    with Ledger() as led:
        result = reconcile(led, window, month, aws=aws, gcp_export=gcp_export, tolerance_pct=tolerance_pct, now=now)
    rows = result.as_dicts()
    if json_out:
        print_json({"month": month, "tolerance_pct": tolerance_pct, "rows": rows})
        return
    table = [
        (r["provider"], r["experiment"], f"{r['ledger_usd']:,.2f}", f"{r['bill_usd']:,.2f}", f"{r['diff_usd']:+,.2f}",
         "" if r["diff_pct"] is None else f"{r['diff_pct']:+.1f}%", r["status"])
        for r in rows
    ]  # fmt: skip
    print_table(f"ledger vs bill, {month} (USD; diff = bill - ledger)", ["provider", "experiment", "ledger", "bill", "diff", "diff %", "status"], table)
    info(f"{len(result.mismatches)} of {len(rows)} experiments differ by more than {tolerance_pct:g}%")


@budget_app.command("status")
def budget_status_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    as_of: str | None = typer.Option(None, "--as-of", help="The month of this time (default: now)."),
) -> None:
    """Spend this month against each budget."""
    from launcher.planning.budget import budget_status, budgets_path, load_budgets
    from launcher.cli.render import info, print_json, print_table
    from launcher.ledger import Ledger

    config = load_budgets()
    now = _as_of(as_of)
    if not config.budgets:
        if json_out:
            print_json([])
        info(f"no budgets configured (write {budgets_path()})")
        return
    with Ledger() as led:
        statuses = budget_status(led, now, config)
    if json_out:
        print_json([s.as_dict() for s in statuses])
        return

    from launcher.money import usd

    rows = [
        (s.budget, s.month, usd(s.spent_usd), usd(s.monthly_limit_usd), usd(s.remaining_usd),
         "" if s.used_pct is None else "< 1%" if 0 < s.used_pct < 0.5 else f"{s.used_pct:.0f}%", usd(s.burn_usd_per_hour),
         usd(s.hourly_burn_limit_usd_per_hour), s.state)
        for s in statuses
    ]  # fmt: skip
    print_table("budgets (USD)", ["budget", "month", "spent", "monthly limit", "left", "used", "burn $/h", "burn limit $/h", "state"], rows)
