"""Expected cost to finish: the price per hour times the expected wall hours. The one definition
for catalog offers (pricing.rank, vectorized), declared clusters and the local offer; no numpy
here, so a local-only launch can score its offer without it."""

from __future__ import annotations


def expected_cost_usd(price_usd_per_hour, expected_hours):
    """USD to finish (floats or numpy arrays)."""
    return price_usd_per_hour * expected_hours
