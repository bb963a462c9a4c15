"""Amounts of money for people: cents, but never a non-zero amount shown as zero."""

from __future__ import annotations

import math


def usd(value: float | None, *, sign: str = "") -> str:
    """12.345 -> '12.35', 0.003 -> '< 0.01', -0.003 -> '> -0.01', None -> ''. `sign` is put
    before the digits ('$' -> '$12.35', '< $0.01')."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if 0 < abs(value) < 0.005:
        return f"< {sign}0.01" if value > 0 else f"> -{sign}0.01"
    text = f"{abs(value):,.2f}"
    return f"-{sign}{text}" if value < 0 and text != "0.00" else f"{sign}{text}"
