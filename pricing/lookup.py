"""Price of one running instance, for callers that know the instance, not a GPU shape (reaper).

For GCP the price of a GPU host (e.g. a2-highgpu-8g) includes its accelerators, as in offers.
Without a zone, the cheapest zone of the region is used: savings computed from it are a lower
bound, never an overstatement.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def hourly_price(
    cloud: str,
    region: str,
    instance_type: str,
    *,
    spot: bool = False,
    zone: str | None = None,
    catalog_dir: Path | str | None = None,
    cache_dir: Path | None = None,
    risk_file: Path | None = None,
) -> float | None:
    """$/h from the catalog (catalog dir, cache or snapshot), or None when it has no such row."""
    from pricing import frame as fr
    from pricing.catalog import load_catalog

    catalog_dir = catalog_dir if catalog_dir is not None else os.environ.get("LAUNCHER_CATALOG_DIR") or None
    offers = load_catalog(catalog_dir, cache_dir=cache_dir, risk_file=risk_file).offers
    mask = (
        fr.eq(offers["cloud"], cloud)
        & fr.eq(offers["region"], region)
        & fr.eq(offers["instance_type"], instance_type)
        & (offers["spot"].to_numpy() == bool(spot))
    )
    if zone is not None and (mask & fr.eq(offers["zone"], zone)).any():
        mask &= fr.eq(offers["zone"], zone)
    prices = offers["price_usd_per_hour"].to_numpy(dtype="float64")[mask]
    prices = prices[prices > 0]
    return float(np.min(prices)) if len(prices) else None
