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
    from launcher.planning.offers import OfferQuery, OffersQuery, offers as rank_offers

    clouds = _split(cloud)
    filters = OfferQuery(
        gpus=() if gpus else None,  # the shapes --gpus names, from the catalog's names (gpu_names)
        spot=True if spot else False if on_demand else None,
        clouds=tuple(c.lower() for c in clouds) if clouds else None,
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
    gpu_names = _split(gpus) or ()
    result = rank_offers(
        OffersQuery(filters=filters, gpu_names=gpu_names, limit=limit or None, catalog_dir=GLOBALS.catalog_dir)
    )
    if as_json:
        from launcher.cli.render import print_json

        print_json([r.as_record() for r in result.rows])
        return
    _print_table(result)


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


def _print_table(result) -> None:
    from launcher.cli.render import info, print_text_table

    rows = []
    for r in result.rows:
        s, o = r.scored, r.scored.offer
        gpus = f"{o.accelerator}:{o.accelerator_count}" if o.accelerator else "-"
        rows.append(
            (
                s.rank,
                ("* " if r.enabled else "  ") + o.cloud,
                o.region,
                o.zone or "-",
                o.instance_type,
                gpus,
                "spot" if o.spot else "on-demand",
                f"{o.price_usd_per_hour:.4f}",
                r.risk_words(),
                f"{s.expected_cost_usd:.2f}",
                f"{s.expected_hours:.3f}",
            )
        )
    print_text_table(
        ["#", "cloud", "region", "zone", "instance type", "GPUs", "market", "$/h", "interruption risk (source)",
         "exp. $", "exp. h"],
        rows,
    )  # fmt: skip
    sources = ", ".join(f"{c}: {s.kind}" + (f" {s.as_of[:10]}" if s.as_of else "") for c, s in result.sources.items())
    declared = result.declared_rows
    info(f"{len(result.rows)} of {result.matched + len(declared)} matching offers shown; * = credentials found (clusters: reachable). Catalog: {sources}")
    for r in declared:
        if not r.enabled:
            info(f"cluster {r.scored.offer.region} ({r.scored.offer.cloud}) not enabled: {r.cluster_reason}")
    for why, n in result.dropped.items():
        info(f"left out {n}: {why}")
    note = result.stale_note()
    if note:
        info(note)
