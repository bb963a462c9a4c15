"""Inline SVG bar charts, generated in Python (no JavaScript library, no network).

Each chart is a <svg class="chart" data-chart=NAME> with one <rect class="bar"> per non-zero
value and a <title> tooltip on every bar, so it reads in any browser and in tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


def nice_max(value: float) -> float:
    """The smallest 1/2/2.5/5 x 10^k at or above value (axis top)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= value * 0.999999:
            return m * exp
    return 10 * exp


def money(v: float) -> str:
    from launcher.money import usd

    return usd(v, sign="$") if abs(v) < 1000 else f"${v:,.0f}"


def tick_labels(values: Sequence[float]) -> list[str]:
    """Axis labels in dollars with the fewest decimals (at least the cents, none from $1,000)
    that state every tick exactly: $0.00 $0.0025 $0.005 ... for small amounts."""
    decimals = 0 if max(values, default=0) >= 1000 else 2

    def exact(d: int) -> bool:
        return all(abs(round(v, d) - v) <= 1e-9 * max(1.0, abs(v)) for v in values)

    while not exact(decimals) and decimals < 12:
        decimals += 1
    return [f"${v:,.{decimals}f}" for v in values]


def _legend(names: Sequence[str], x: float, y: float) -> list[str]:
    out = []
    for i, name in enumerate(names):
        ly = y + i * 16
        out.append(f'<rect class="legend" x="{x:.1f}" y="{ly:.1f}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{ly + 9:.1f}" font-size="11">{escape(str(name))}</text>')
    return out


def stacked_columns(
    name: str,
    title: str,
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    width: int = 760,
    height: int = 300,
) -> str:
    """Vertical stacked columns: one column per category (e.g. day), one colour per series."""
    left, right, top, bottom = 64, 150, 28, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(max(0.0, float(s[i])) for s in series.values()) for i in range(len(categories))]
    ymax = nice_max(max(totals, default=0.0))
    n = max(1, len(categories))
    slot = plot_w / n
    bar_w = max(1.0, slot * 0.75)
    parts = _frame(name, title, width, height, left, top, plot_w, plot_h, ymax)
    for i, cat in enumerate(categories):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        for k, (sname, values) in enumerate(series.items()):
            v = max(0.0, float(values[i]))
            if v <= 0:
                continue
            bh = v / ymax * plot_h
            y -= bh
            parts.append(
                f'<rect class="bar" x="{x:.2f}" y="{y:.2f}" width="{bar_w:.2f}" height="{bh:.2f}" '
                f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(str(sname))} {escape(str(cat))}: {money(v)}</title></rect>'
            )
    step = max(1, math.ceil(n / 12))
    for i in range(0, len(categories), step):
        cx = left + i * slot + slot / 2
        parts.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 16}" font-size="10" text-anchor="middle">{escape(str(categories[i]))}</text>'
        )
    parts += _legend(list(series), width - right + 12, top)
    parts.append("</svg>")
    return "\n".join(parts)


def horizontal_bars(
    name: str,
    title: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    width: int = 760,
    stacked: bool = True,
) -> str:
    """Horizontal bars, one row per label (long names such as experiments fit)."""
    row_h = 22 if stacked else 12 * max(1, len(series)) + 8
    left, right, top, bottom = 180, 150, 28, 28
    height = top + bottom + row_h * max(1, len(labels))
    plot_w, plot_h = width - left - right, height - top - bottom
    if stacked:
        peak = max((sum(max(0.0, float(s[i])) for s in series.values()) for i in range(len(labels))), default=0.0)
    else:
        peak = max((max(0.0, float(v)) for s in series.values() for v in s), default=0.0)
    xmax = nice_max(peak)
    parts = [
        f'<svg class="chart" data-chart="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
    ]
    ticks = tick_labels([xmax * t / 4 for t in range(5)])
    for t in range(5):
        x = left + plot_w * t / 4
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 14}" font-size="10" text-anchor="middle">{ticks[t]}</text>')
    for i, label in enumerate(labels):
        y0 = top + i * row_h
        parts.append(
            f'<text x="{left - 6}" y="{y0 + row_h / 2 + 4:.1f}" font-size="11" text-anchor="end">{escape(str(label))[:28]}</text>'
        )
        x = float(left)
        for k, (sname, values) in enumerate(series.items()):
            v = max(0.0, float(values[i]))
            if v <= 0:
                continue
            bw = v / xmax * plot_w
            if stacked:
                bx, by, bh = x, y0 + 3, row_h - 6
                x += bw
            else:
                bx, by, bh = float(left), y0 + 4 + k * 12, 10
            parts.append(
                f'<rect class="bar" x="{bx:.2f}" y="{by:.2f}" width="{bw:.2f}" height="{bh:.2f}" '
                f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(str(label))} {escape(str(sname))}: {money(v)}</title></rect>'
            )
    parts += _legend(list(series), width - right + 12, top)
    parts.append("</svg>")
    return "\n".join(parts)


def _frame(name: str, title: str, width: int, height: int, left: int, top: int, plot_w: int, plot_h: int, ymax: float) -> list[str]:
    parts = [
        f'<svg class="chart" data-chart="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    labels = tick_labels([ymax * t / 4 for t in range(5)])
    for t in range(5):
        y = top + plot_h - plot_h * t / 4
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{labels[t]}</text>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>')
    return parts


def empty_chart(name: str, title: str, message: str = "no cost in this period", width: int = 760) -> str:
    return (
        f'<svg class="chart empty" data-chart="{escape(name)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="60">'
        f'<text x="10" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
        f'<text x="10" y="40" font-size="12" fill="#777">{escape(message)}</text></svg>'
    )
