"""A pure-Python array namespace for one value at a time: the few operations the cost rules
(launcher.cost.attempts) use, with numpy's semantics on floats (NaN propagates through
maximum/minimum, fmax ignores it), so the same rule text runs on one attempt without numpy."""

from __future__ import annotations

from typing import Any


def isnan(x: float) -> bool:
    return x != x


def logical_not(x: bool) -> bool:
    return not x


def where(cond: bool, a: Any, b: Any) -> Any:
    return a if cond else b


def maximum(a: float, b: float) -> float:
    return a if (a >= b or a != a) else b


def minimum(a: float, b: float) -> float:
    return a if (a <= b or a != a) else b


def fmax(a: float, b: float) -> float:
    if a != a:
        return b
    return a if (a >= b or b != b) else b


def clip(x: float, lo: float, hi: float) -> float:
    return minimum(maximum(x, lo), hi)
