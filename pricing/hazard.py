"""Hazard units shared by the risk model and the user's risk file: rates per hour, overrides."""

from __future__ import annotations

import math
from dataclasses import dataclass

HOURS_PER_MONTH = 730.0


def monthly_fraction_to_hourly_hazard(p: float) -> float:
    """λ such that an instance running a whole month is interrupted with probability p."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"monthly fraction must be in [0, 1): {p}")
    return -math.log1p(-p) / HOURS_PER_MONTH


@dataclass(frozen=True)
class RiskOverride:
    cloud: str
    hazard_per_hour: float
    region: str | None = None
    instance_type: str | None = None
