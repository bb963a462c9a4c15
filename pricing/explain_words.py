"""Plain words for what an offer's figures rest on: where its interruption risk comes from, and
how old its price is. Pure and light (no pandas): `launcher offers` renders these."""

from __future__ import annotations

import math
from datetime import UTC, datetime

STALE_AFTER_DAYS = 7.0
_ADVISOR_BANDS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


def interruption_source(band: str) -> str:
    """A stable code for JSON: none | aws-spot-advisor | estimate | risk-file."""
    if band == "on-demand":
        return "none"
    if band in _ADVISOR_BANDS:
        return "aws-spot-advisor"
    return "risk-file" if band == "user" else "estimate"


def interruption_words(cloud: str, band: str, hazard_per_hour: float) -> str:
    """E.g. '5-10%/month, AWS Spot Advisor' or '~10%/day, estimate (gcp publishes none)'."""
    if band == "on-demand":
        return "none (on-demand)"
    if band in _ADVISOR_BANDS:
        return f"{band}/month, AWS Spot Advisor"
    per_day = 100.0 * -math.expm1(-24.0 * hazard_per_hour)
    per_month = 100.0 * -math.expm1(-730.0 * hazard_per_hour)
    if band == "user":
        return f"~{per_day:.2g}%/day, your risk.yaml"
    if cloud == "aws":
        return f"~{per_month:.2g}%/month, AWS average (type not in the Spot Advisor)"
    return f"~{per_day:.2g}%/day, estimate ({cloud} publishes no rate)"


def age_days(as_of: str | None, now: datetime | None = None) -> float | None:
    """Days since `as_of` (an ISO date or timestamp; naive means UTC), None when unknown."""
    if not as_of:
        return None
    try:
        t = datetime.fromisoformat(as_of)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return ((now or datetime.now(UTC)) - t).total_seconds() / 86400.0


def stale_note(as_of_by_cloud: dict[str, str | None], now: datetime | None = None) -> str | None:
    """A footer line naming the clouds whose prices are older than a week, or None."""
    old = []
    for cloud, as_of in sorted(as_of_by_cloud.items()):
        days = age_days(as_of, now)
        if days is not None and days > STALE_AFTER_DAYS:
            old.append(f"{cloud} ({as_of[:10]}, {days:.0f} days)")
    if not old:
        return None
    return f"prices older than a week: {', '.join(old)}; refresh with `launcher catalog refresh`"
