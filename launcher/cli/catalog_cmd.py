"""Commands: `launcher catalog refresh` and `launcher catalog status`.

Light at import: httpx, pandas and boto3 load inside the commands (boto3 only for --aws-spot-prices).
"""

from __future__ import annotations

import typer

from launcher.cli.app import GLOBALS, app

catalog_app = typer.Typer(
    help="Price catalogs: refresh the local cache, show where prices come from.", no_args_is_help=True
)
app.add_typer(catalog_app, name="catalog")


@catalog_app.command("refresh")
def refresh(
    url: str | None = typer.Option(
        None,
        "--url",
        envvar="LAUNCHER_CATALOG_URL",
        help="Base URL holding <schema>/<cloud>/vms.csv (default: public SkyPilot catalog).",
    ),
    schema: str = typer.Option("v8", "--schema", help="Catalog schema folder (v7 or v8)."),
    clouds: list[str] | None = typer.Option(
        None, "--clouds", help="Clouds to fetch (repeatable or comma list; default all)."
    ),
    advisor_url: str | None = typer.Option(
        None, "--advisor-url", help="AWS Spot Advisor feed URL (default: the public one)."
    ),
    no_advisor: bool = typer.Option(False, "--no-advisor", help="Do not fetch the AWS Spot Advisor feed."),
    aws_spot_prices: bool = typer.Option(
        False,
        "--aws-spot-prices",
        help="Overlay live AWS spot prices (describe_spot_price_history; needs AWS credentials).",
    ),
    regions: list[str] | None = typer.Option(
        None, "--regions", help="Regions for --aws-spot-prices (default: AWS GPU regions in the catalog)."
    ),
    timeout_s: float = typer.Option(20.0, "--timeout", help="Seconds per request."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Download current catalogs into the cache (keeps the cached copy of any cloud that fails)."""
    from launcher.errors import ProviderError
    from launcher.planning import catalog

    results = catalog.refresh(
        url=url, schema=schema, clouds=_split(clouds), timeout_s=timeout_s, advisor_url=advisor_url,
        advisor=not no_advisor, aws_spot_prices=aws_spot_prices, aws_spot_regions=_split(regions),
    )  # fmt: skip
    _render(results, as_json)
    failed = [r for r in results if not r.ok]
    if failed:
        names = ", ".join(f"{r.name}" + (" (cached copy kept)" if r.kept_cached else "") for r in failed)
        raise ProviderError(f"refresh failed for {names}")


@catalog_app.command("status")
def status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where each cloud's prices come from (catalog folder, cache or built-in snapshot) and their age."""
    from launcher.planning import catalog

    rows = catalog.status(GLOBALS.catalog_dir)
    if as_json:
        from dataclasses import asdict

        from launcher.cli.render import print_json

        print_json([asdict(r) for r in rows])
        return
    from launcher.cli.render import print_table

    print_table(
        None,
        ["cloud", "source", "as of", "age (h)", "live AWS spot", "origin", "path"],
        [(r.cloud, r.kind, r.as_of, r.age_hours, r.spot_overlay or "-", r.origin, r.path) for r in rows],
    )


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [
        v.strip().lower() if v.strip().isalpha() else v.strip() for item in values for v in item.split(",") if v.strip()
    ]


def _render(results, as_json: bool) -> None:
    if as_json:
        from dataclasses import asdict

        from launcher.cli.render import print_json

        print_json([asdict(r) for r in results])
        return
    from launcher.cli.render import print_table

    print_table(
        None,
        ["catalog", "result", "detail", "url"],
        [
            (r.name, "ok" if r.ok else ("FAILED, cached copy kept" if r.kept_cached else "FAILED"), r.detail, r.url)
            for r in results
        ],
    )
