"""Command: `launcher offers` (ranked GPU offers across every cloud in the catalog).

Kept light at import: the pricing module loads inside the command; ranking reads the compiled
catalog (numpy only), so neither pandas nor pyarrow is imported here.
"""

from __future__ import annotations

import typer

from launcher.cli.app import GLOBALS, app
from launcher.errors import BadInputError


def _split(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return tuple(dict.fromkeys(out)) or None


@app.command("offers")
def offers(
    gpus: list[str] | None = typer.Option(
        None, "--gpus", help="GPU shape NAME[:COUNT]; 'A100|H100:8' or a comma list means any of them. Repeatable."
    ),
    spot: bool = typer.Option(False, "--spot", help="Spot offers only."),
    on_demand: bool = typer.Option(False, "--on-demand", help="On-demand offers only."),
    any_market: bool = typer.Option(False, "--any", help="Spot and on-demand (the default)."),
    cloud: list[str] | None = typer.Option(None, "--cloud", help="Only these clouds (repeatable or comma list)."),
    region: list[str] | None = typer.Option(None, "--region", help="Only these regions (repeatable)."),
    exclude_region: list[str] | None = typer.Option(None, "--exclude-region", help="Never these regions."),
    min_gpu_memory_gib: float | None = typer.Option(None, "--min-gpu-memory-gib", help="Total GPU memory at least."),
    min_vcpus: float | None = typer.Option(None, "--min-vcpus"),
    min_memory_gib: float | None = typer.Option(None, "--min-memory-gib"),
    max_price: float | None = typer.Option(None, "--max-price", help="Max $/h per instance."),
    hours: float = typer.Option(1.0, "--hours", help="Hours of work to finish (ranking horizon)."),
    checkpoint_minutes: float | None = typer.Option(
        None, "--checkpoint-minutes", help="Checkpoint interval; default: the Young/Daly optimum per offer."
    ),
    checkpoint_cost_minutes: float = typer.Option(
        1.0, "--checkpoint-cost-minutes", help="Time to write one checkpoint."
    ),
    restart_minutes: float = typer.Option(5.0, "--restart-minutes", help="Time to restart after an interruption."),
    limit: int | None = typer.Option(20, "--limit", help="Show the best N (0 = all)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (a list of offers, best first)."),
) -> None:
    """Rank GPU offers of every cloud in the catalog by expected cost to finish --hours of work."""
    if sum((spot, on_demand, any_market)) > 1:
        raise BadInputError("give at most one of --spot, --on-demand, --any")
    for flag, value in (
        ("--hours", hours),
        ("--checkpoint-minutes", checkpoint_minutes),
        ("--max-price", max_price),
    ):
        if value is not None and value <= 0:
            raise BadInputError(f"{flag} must be positive (got {value:g})")
    if limit is not None and limit < 0:
        raise BadInputError("--limit must be >= 0")

    _import_numpy_with_one_blas_thread()
    from launcher import paths
    from launcher.providers.detect import enabled_clouds
    from pricing.compiled import load_offer_catalog
    from pricing.gpus import parse_gpus
    from pricing.models import OfferQuery
    from pricing.rank import explain_offers, offers_as_records

    # The compiled catalog: numpy only (pandas parses it once, when the sources change).
    catalog = load_offer_catalog(
        GLOBALS.catalog_dir, cache_dir=paths.catalog_cache_dir(), risk_file=paths.risk_file()
    )
    clouds = _split(cloud)
    if clouds:
        clouds = tuple(c.lower() for c in clouds)
    query = OfferQuery(
        gpus=parse_gpus(list(_split(gpus) or ()), known=catalog.accelerators()) if gpus else None,
        spot=True if spot else False if on_demand else None,
        clouds=clouds,
        regions=_split(region),
        exclude_regions=_split(exclude_region) or (),
        min_gpu_memory_gib=min_gpu_memory_gib,
        min_vcpus=min_vcpus,
        min_memory_gib=min_memory_gib,
        max_price_usd_per_hour=max_price,
        work_hours=hours,
        checkpoint_minutes=checkpoint_minutes,
        checkpoint_cost_minutes=checkpoint_cost_minutes,
        restart_overhead_minutes=restart_minutes,
    )
    from launcher.cli.offers_declared import declared_records, merge_records

    declared = declared_records(query)
    report = None
    from pricing.clouds import DECLARED_CLUSTER_KINDS

    catalog_clouds = None if clouds is None else tuple(c for c in clouds if c not in (*DECLARED_CLUSTER_KINDS, "k8s"))
    if catalog_clouds is None or catalog_clouds:
        from dataclasses import replace

        from launcher.errors import NoOfferError

        try:
            report = explain_offers(catalog, replace(query, clouds=catalog_clouds), limit=limit or None)
        except NoOfferError:
            if not declared:
                raise
    enabled = {name: st.enabled for name, st in enabled_clouds().items()}
    records = merge_records(offers_as_records(report.offers, enabled, {c: s.as_of for c, s in catalog.sources.items()}) if report else [], declared, limit or None)
    if report is None:
        from pricing.rank import RankReport

        report = RankReport(offers=[], matched=0)
    if as_json:
        from launcher.cli.render import print_json

        print_json(records)
        return
    _print_table(records, report, catalog)


def _import_numpy_with_one_blas_thread() -> None:
    """Ranking never calls BLAS. OpenBLAS starts a pool of busy-waiting threads per core when
    numpy loads, which costs this short process about as much as the rest of numpy's import;
    ask for one thread while it loads, then put the environment back (children are unaffected)."""
    import os
    import sys

    if "numpy" in sys.modules:
        return
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved


def _print_table(records: list[dict], report, catalog) -> None:
    from launcher.cli.render import info, print_text_table
    from pricing.explain_words import interruption_words, stale_note

    rows = []
    for r in records:
        gpus = f"{r['accelerator']}:{r['accelerator_count']}" if r["accelerator"] else "-"
        rows.append(
            (
                r["rank"],
                ("* " if r["enabled"] else "  ") + r["cloud"],
                r["region"],
                r["zone"] or "-",
                r["instance_type"],
                gpus,
                "spot" if r["spot"] else "on-demand",
                f"{r['price_usd_per_hour']:.4f}",
                interruption_words(r["cloud"], r["interruption_band"], r["hazard_per_hour"]),
                f"{r['expected_cost_usd']:.2f}",
                f"{r['expected_hours']:.3f}",
            )
        )
    print_text_table(
        ["#", "cloud", "region", "zone", "instance type", "GPUs", "market", "$/h", "interruption risk (source)",
         "exp. $", "exp. h"],
        rows,
    )  # fmt: skip
    sources = ", ".join(f"{c}: {s.kind}" + (f" {s.as_of[:10]}" if s.as_of else "") for c, s in catalog.sources.items())
    n_declared = sum(1 for r in records if "reason" in r)
    info(f"{len(records)} of {report.matched + n_declared} matching offers shown; * = credentials found (clusters: reachable). Catalog: {sources}")
    for r in records:
        if "reason" in r and not r["enabled"]:
            info(f"cluster {r['region']} ({r['cloud']}) not enabled: {r['reason']}")
    for why, n in report.dropped.items():
        info(f"left out {n}: {why}")
    shown = {r["cloud"] for r in records}
    note = stale_note({c: s.as_of for c, s in catalog.sources.items() if c in shown})
    if note:
        info(note)
