"""Live AWS spot prices from `describe_spot_price_history`, written as an overlay on the catalog.

boto3 is imported only inside `fetch_spot_prices` (it is an optional extra and slow to import).
The overlay (cache/aws/spot_overlay.csv) holds the latest price per (availability zone,
instance type); the catalog loader applies it to the AWS rows whose zone id or name matches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from pricing.atomic import atomic_write_bytes, atomic_write_text
from pricing.errors import PricingCredentialsError, PricingSourceError
from pricing.refresh import FetchResult, lock
from pricing.sources import spot_overlay_path

OVERLAY_COLUMNS = ["region", "zone", "zone_id", "instance_type", "spot_price", "timestamp"]
_LINUX = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


def fetch_spot_prices(
    regions: Sequence[str],
    instance_types: Sequence[str],
    *,
    endpoint_url: str | None = None,
    timeout_s: float = 20.0,
    now: datetime | None = None,
) -> pd.DataFrame:
    """Latest Linux spot price per (zone, instance type) in each region (boto3 standard creds)."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    cfg = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 3, "mode": "standard"})
    start = now or datetime.now(UTC)
    rows = []
    types = sorted(set(instance_types))
    for region in regions:
        try:
            ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url, config=cfg)
            zone_ids = {z["ZoneName"]: z.get("ZoneId") for z in ec2.describe_availability_zones()["AvailabilityZones"]}
            pager = ec2.get_paginator("describe_spot_price_history")
            # StartTime=now returns the price in effect now for each zone and type.
            for i in range(0, len(types), 100):
                for page in pager.paginate(
                    InstanceTypes=types[i : i + 100], ProductDescriptions=list(_LINUX), StartTime=start
                ):
                    for h in page.get("SpotPriceHistory", []):
                        if h.get("ProductDescription") not in _LINUX:
                            continue
                        zone = h["AvailabilityZone"]
                        rows.append(
                            (region, zone, zone_ids.get(zone), h["InstanceType"], float(h["SpotPrice"]), h["Timestamp"])
                        )
        except NoCredentialsError as e:
            raise PricingCredentialsError("no AWS credentials for describe_spot_price_history", hint=str(e)) from e
        except (BotoCoreError, ClientError) as e:
            raise PricingSourceError(f"describe_spot_price_history failed in {region}: {e}") from e
    df = pd.DataFrame(rows, columns=OVERLAY_COLUMNS)
    if df.empty:
        return df
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    df = df.sort_values(["region", "zone", "instance_type", "timestamp"]).drop_duplicates(
        ["region", "zone", "instance_type"], keep="last"
    )
    return df.reset_index(drop=True)


def refresh_spot_overlay(
    *,
    regions: Sequence[str] | None = None,
    instance_types: Sequence[str] | None = None,
    cache_dir: Path,
    endpoint_url: str | None = None,
    timeout_s: float = 20.0,
    clock: Callable[[], datetime] | None = None,
) -> FetchResult:
    """Fetch live spot prices for the AWS GPU types/regions in the current catalog, write the overlay."""
    if regions is None or instance_types is None:
        from pricing.catalog import load_catalog

        offers = load_catalog(cache_dir=cache_dir).offers
        aws = offers[(offers["cloud"] == "aws") & offers["accelerator"].notna()]
        regions = regions or sorted(aws["region"].astype(str).unique())
        instance_types = instance_types or sorted(aws["instance_type"].astype(str).unique())
    if not regions or not instance_types:
        return FetchResult("aws-spot-prices", False, None, "no AWS GPU instance types in the catalog")
    df = fetch_spot_prices(regions, instance_types, endpoint_url=endpoint_url, timeout_s=timeout_s)
    fetched_at = (clock or (lambda: datetime.now(UTC)))().isoformat(timespec="seconds")
    out = spot_overlay_path(cache_dir)
    with lock(cache_dir):
        atomic_write_bytes(out, df.to_csv(index=False, lineterminator="\n").encode())
        meta = {
            "source": "ec2:DescribeSpotPriceHistory",
            "endpoint_url": endpoint_url,
            "regions": list(regions),
            "fetched_at": fetched_at,
            "rows": len(df),
        }
        atomic_write_text(out.with_suffix(".meta.json"), json.dumps(meta, indent=2) + "\n")
    return FetchResult(
        "aws-spot-prices",
        True,
        endpoint_url or "ec2",
        f"{len(df)} prices in {len(regions)} regions",
        fetched_at=fetched_at,
    )
