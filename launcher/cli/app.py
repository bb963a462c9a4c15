"""The typer application and the global options every command shares.

Command modules import only this module (and light libraries) at import time; anything heavy
(SkyPilot, Pulumi, boto3, torch, pandas) is imported inside the command function, so that
`launcher offers` stays fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import typer

app = typer.Typer(
    name="launcher",
    help="Launch ML jobs on the cheapest suitable GPU capacity, recover from preemptions, reap idle machines, report cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@dataclass
class Globals:
    debug: bool = False
    catalog_dir: Path | None = None


GLOBALS = Globals()


def _print_version(value: bool) -> None:
    if value:
        from launcher import __version__

        typer.echo(f"launcher {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    catalog_dir: Path | None = typer.Option(
        None,
        "--catalog-dir",
        envvar="LAUNCHER_CATALOG_DIR",
        help="Use the catalogs in DIR (<DIR>/<cloud>/vms.csv) instead of the cache or the built-in snapshot.",
    ),
) -> None:
    GLOBALS.debug = debug or bool(os.environ.get("LAUNCHER_DEBUG"))
    GLOBALS.catalog_dir = catalog_dir
