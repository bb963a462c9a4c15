"""`launcher runs diff A B`: two runs side by side, differences highlighted."""

from __future__ import annotations

import sys

import typer

from launcher.cli.runs_cmd import _need_ledger, runs_app


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


@runs_app.command("diff")
def runs_diff(
    a: str = typer.Argument(..., help="First run id (or unique prefix)."),
    b: str = typer.Argument(..., help="Second run id (or unique prefix)."),
    json_out: bool = typer.Option(False, "--json"),
    only_diff: bool = typer.Option(False, "--only-differences", help="Show only the rows that differ."),
) -> None:
    """Provenance, resources, cost and results of two runs side by side; differences highlighted."""
    from rich.console import Console
    from rich.table import Table

    from launcher.cli.render import _width, print_json
    from launcher.tracking.run_diff import diff_runs, rows_json

    with _need_ledger() as led:
        ra, rb = led.find_run(a), led.find_run(b)
        rows = diff_runs(led, ra, rb)
    if json_out:
        print_json(rows_json(rows, ra, rb))
        return
    table = Table(title=f"{ra.run_id} vs {rb.run_id}")
    for col in ("", "section", "field", ra.run_id, rb.run_id):
        table.add_column(col, overflow="fold")
    for r in rows:
        if only_diff and r.same:
            continue
        style = None if r.same else "bold yellow"
        table.add_row("" if r.same else "≠", r.section, r.field, _cell(r.a), _cell(r.b), style=style)
    Console(file=sys.stdout, width=_width(sys.stdout)).print(table)
    n = sum(1 for r in rows if not r.same)
    sys.stderr.write(f"{n} difference(s)\n")
