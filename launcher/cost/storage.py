"""Checkpoint storage: list prices and the cost of GB-hours, the one place reports, the FOCUS
export and the cost rollup take them from (no pandas here: the controller writes the rollup)."""

from __future__ import annotations

from collections.abc import Mapping

HOURS_PER_MONTH = 730.0
# Standard-class object storage list prices, USD per GB-month (S3 us-east-1, GCS multi-region).
DEFAULT_STORAGE_USD_PER_GB_MONTH: Mapping[str, float] = {"aws": 0.023, "gcp": 0.026, "local": 0.0}
OTHER_STORAGE_USD_PER_GB_MONTH = 0.023  # a cloud without its own price

# What a checkpoint is assumed to be kept for (the storage it bills): the last N of a run, each
# until this long after the run ended. CostAssumptions, the rollup and the report loader use these.
CHECKPOINT_KEEP_LAST = 3
CHECKPOINT_RETENTION_AFTER_RUN_S = 7 * 86400.0


def are_list_prices(per_cloud_usd_per_gb_month: Mapping[str, float], other_usd_per_gb_month: float) -> bool:
    """Whether these storage prices are the list prices above (those the cost rollup holds in USD)."""
    return dict(per_cloud_usd_per_gb_month) == dict(DEFAULT_STORAGE_USD_PER_GB_MONTH) and (
        other_usd_per_gb_month == OTHER_STORAGE_USD_PER_GB_MONTH
    )


def storage_usd(gb_hours, usd_per_gb_month):
    """USD of `gb_hours` at `usd_per_gb_month` (a month = HOURS_PER_MONTH); floats or arrays."""
    return gb_hours / HOURS_PER_MONTH * usd_per_gb_month


def default_storage_usd(cloud: str | None, gb_hours: float) -> float:
    """At the list price of `cloud` (the cost rollup's USD figure)."""
    return storage_usd(gb_hours, DEFAULT_STORAGE_USD_PER_GB_MONTH.get(cloud or "", OTHER_STORAGE_USD_PER_GB_MONTH))
