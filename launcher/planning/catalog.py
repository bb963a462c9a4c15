"""The price catalog planning ranks with: refresh the local cache (SkyPilot catalogs, the AWS
Spot Advisor feed, live AWS spot prices) and say where each cloud's prices come from.
`launcher catalog` renders these; pricing/ does the work, given the launcher's folders."""

from __future__ import annotations

from pathlib import Path

from launcher import paths
from launcher.errors import BadInputError, UnknownNameError


def refresh(
    *,
    url: str | None,
    schema: str,
    clouds: list[str] | None,
    timeout_s: float,
    advisor_url: str | None,
    advisor: bool,
    aws_spot_regions: list[str] | None = None,
    aws_spot_prices: bool = False,
) -> list:
    """Download into the cache (a cloud that fails keeps its cached copy) and compile the offers
    table, so the next `launcher offers` reads it (numpy only). Returns one result per source."""
    from pricing.refresh import refresh_catalogs
    from pricing.risk import ADVISOR_FEED_URL
    from pricing.sources import SUPPORTED_CLOUDS

    if schema not in ("v7", "v8"):
        raise BadInputError(f"unsupported catalog schema {schema!r}", hint="use v7 or v8")
    for c in clouds or ():
        if c not in SUPPORTED_CLOUDS:
            raise UnknownNameError("cloud", c, SUPPORTED_CLOUDS)
    if timeout_s <= 0:
        raise BadInputError("--timeout must be positive")
    result = refresh_catalogs(
        base_url=url,
        schema=schema,
        clouds=clouds,
        timeout_s=timeout_s,
        cache_dir=paths.catalog_cache_dir(),
        advisor_url=(advisor_url or ADVISOR_FEED_URL) if advisor else None,
    )
    results = list(result.results)
    if aws_spot_prices:
        from pricing.aws_spot import refresh_spot_overlay

        results.append(refresh_spot_overlay(regions=aws_spot_regions, timeout_s=timeout_s, cache_dir=paths.catalog_cache_dir()))
    if any(r.ok for r in results):
        from launcher.planning.offers import load_catalog

        load_catalog(None)
    return results


def status(catalog_dir: Path | None) -> list:
    """Per cloud: where its prices come from (catalog folder, cache or built-in snapshot), their age."""
    from pricing.sources import catalog_status

    return catalog_status(catalog_dir, paths.catalog_cache_dir())
