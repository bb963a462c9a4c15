"""Durations written by people: '90m', '6h', '1h30m', '2d', '45s'.

Bare numbers are refused on purpose: '6' could mean seconds, minutes or hours.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.IGNORECASE)
_FULL_RE = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*[smhd]\s*)+$", re.IGNORECASE)


def parse_duration_seconds(value: object) -> float:
    """Seconds in a duration string; ValueError with a readable message otherwise."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"durations are strings with a unit, e.g. '90m' or '6h' (got {value!r})")
    if not _FULL_RE.match(value):
        raise ValueError(f"malformed duration {value!r}; write e.g. '45s', '90m', '6h', '1h30m', '2d'")
    seconds = sum(float(n) * _UNIT_SECONDS[u.lower()] for n, u in _PART_RE.findall(value))
    if seconds <= 0:
        raise ValueError(f"duration {value!r} must be longer than zero")
    return seconds


def format_duration(seconds: float) -> str:
    """'1h30m' style, for plans and status lines."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        n, seconds = divmod(seconds, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"
