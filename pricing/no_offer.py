"""Why a query has no offer, in words: an unknown shape, GPUs the catalog cannot price, or which
filter left nothing, with what would match instead."""

from __future__ import annotations

import numpy as np

from pricing.gpus import gpu_family
from pricing.models import OfferQuery
from pricing.table import OfferTable


def describe(q: OfferQuery) -> str:
    bits = []
    if q.gpus:
        bits.append("|".join(f"{g.name}:{g.count}" for g in q.gpus))
    if q.spot is not None:
        bits.append("spot" if q.spot else "on-demand")
    if q.clouds:
        bits.append("cloud " + ",".join(q.clouds))
    if q.regions:
        bits.append("region " + ",".join(q.regions))
    for label, v in (
        ("GPU memory >=", q.min_gpu_memory_gib),
        ("vCPUs >=", q.min_vcpus),
        ("memory >=", q.min_memory_gib),
    ):
        if v is not None:
            bits.append(f"{label} {v:g}")
    return ", ".join(bits) or "any"


def explain_no_offer(
    table: OfferTable,
    q: OfferQuery,
    dropped: dict[str, int],
    gpu_rows: np.ndarray,
    steps: list[tuple[str, np.ndarray]],
) -> tuple[str, str]:
    """(message, hint) for a query that ranked nothing."""
    msg = f"no offer matches ({describe(q)})"
    if q.gpus is not None and not gpu_rows.any():
        return _no_shape(table, q, msg)
    shape = "|".join(f"{g.name}:{g.count}" for g in q.gpus) if q.gpus else "matching"
    # A filter that alone leaves nothing of what the others keep is the one to name.
    for i, (label, _) in enumerate(steps):
        others = gpu_rows.copy()
        for j, (_, keep) in enumerate(steps):
            if j != i:
                others &= keep
        if others.any() and not (others & steps[i][1]).any():
            n = int(others.sum())
            where = " match the other filters" if len(steps) > 1 else " exist"
            return f"{msg}: {n} {shape} offer{'s' if n != 1 else ''}{where}, none with {label}", _instead(
                table, q, label, others
            )
    rows, applied = gpu_rows, []
    for label, keep in steps:  # only a combination empties it: say how far it got
        after = rows & keep
        if not after.any():
            n = int(rows.sum())
            passed = f" with {' and '.join(applied)}" if applied else ""
            return f"{msg}: {n} {shape} offer{'s' if n != 1 else ''}{passed}, none also with {label}", _instead(
                table, q, label, rows
            )
        rows, applied = after, [*applied, label]
    if dropped:
        msg += "; left out: " + ", ".join(f"{n} {why}" for why, n in dropped.items())
    return msg, _after_drops(table, q, dropped, rows)


def _no_shape(table: OfferTable, q: OfferQuery, msg: str) -> tuple[str, str]:
    assert q.gpus is not None
    unpriced = [u for u in table.unpriced for g in q.gpus if _same(u.accelerator, g.name) and u.accelerator_count == g.count]
    if unpriced:
        why = "; ".join(
            f"the {u.cloud} catalog lists {u.accelerator}:{u.accelerator_count} in {u.zones} zone"
            f"{'s' if u.zones != 1 else ''} but cannot price a machine for them: {u.reason}"
            for u in unpriced
        )
        clouds = ",".join(sorted({u.cloud for u in unpriced}))
        return f"{msg}: {why}", (
            f"refresh that catalog (launcher catalog refresh --clouds {clouds}) or give --catalog-dir with its host rows"
        )
    on_offer = []
    for g in q.gpus:
        col = "accelerator_family" if gpu_family(g.name) == g.name else "accelerator"
        counts = np.unique(table.accelerator_count[table.eq(col, g.name)]).tolist()
        on_offer.append((g.name, counts))
    missing = [name for name, counts in on_offer if not counts]
    detail = "; ".join(
        f"{name} comes in counts {', '.join(map(str, counts))}" for name, counts in on_offer if counts
    )
    if detail:
        return f"{msg}: no offer of that shape in the catalog", f"{detail}" + (
            f"; no {', '.join(missing)} at all" if missing else ""
        )
    return f"{msg}: the catalog has no {', '.join(missing)} offer at all", (
        "see what it has: launcher offers --limit 0, or refresh it: launcher catalog refresh"
    )


def _same(catalog_name: str, wanted: str) -> bool:
    return catalog_name == wanted or (gpu_family(wanted) == wanted and gpu_family(catalog_name) == wanted)


def _instead(table: OfferTable, q: OfferQuery, label: str, rows: np.ndarray) -> str:
    """What the emptying filter could be set to instead, from the rows it saw."""
    if label in ("spot", "on-demand"):
        return f"every such offer is {'on-demand' if label == 'spot' else 'spot'}: try --any"
    for flag, column in (("--cloud", "cloud"), ("--region", "region"), ("zone", "zone"), ("instance type", "instance_type")):
        if label.startswith(flag):
            values = table.present(column, rows)
            shown = ", ".join(values[:12]) + (f" (+{len(values) - 12} more)" if len(values) > 12 else "")
            return f"{flag} with offers of that shape: {shown}"
    for column, unit in (("gpu_memory_gib", "GPU memory"), ("vcpus", "vCPUs"), ("memory_gib", "memory")):
        if label.startswith(unit):
            vals = table.floats[column][rows]
            vals = vals[~np.isnan(vals)]
            if len(vals):
                return f"the most {unit} among them is {float(vals.max()):g}"
            return f"no {unit} figure is known for them"
    return "relax that filter"


def _after_drops(table: OfferTable, q: OfferQuery, dropped: dict[str, int], rows: np.ndarray) -> str:
    price = table.floats["price_usd_per_hour"][rows]
    price = price[price > 0]
    if q.max_price_usd_per_hour is not None and any(k.startswith("above max price") for k in dropped):
        return f"the cheapest is ${float(price.min()):.4g}/h" if len(price) else "raise --max-price"
    if "in an excluded region" in dropped:
        return "every match is in an excluded region: drop an --exclude-region"
    if "expected to miss the deadline" in dropped:
        return "allow more time, or ask for on-demand (no interruptions)"
    return "relax a filter (try --any, another --cloud/--region, or another GPU count)"
