"""Command: `launcher doctor` (check and repair the ledger and the runs it records)."""

from __future__ import annotations

import typer

from launcher.cli.app import app


@app.command("doctor")
def doctor(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only check; repair nothing."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON list: an object per finding."),
) -> None:
    """Check the ledger (integrity, write-ahead log, schema), stuck runs, orphan processes and
    stale clusters; repair what can be repaired and say what cannot. Exit 5 when something
    needs you or cannot be repaired."""
    from launcher import paths
    from launcher.cli.render import print_json, print_table
    from launcher.controller.doctor import OK, REPAIRED, run_doctor
    from launcher.ledger.engine import sqlite_path

    url = paths.db_url()
    findings = run_doctor(url, sqlite_path(url), repair=not dry_run)
    if json_out:
        print_json([f.to_json() for f in findings])
    else:
        print_table("launcher doctor" + (" (dry run: nothing changed)" if dry_run else ""), ["check", "status", "detail"],
                    [(f.check, f.status, f.detail) for f in findings])
    if any(f.status not in (OK, REPAIRED) for f in findings):
        raise typer.Exit(5)
