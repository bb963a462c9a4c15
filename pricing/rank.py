"""Rank offers by expected cost to finish `work_hours` of work (vectorized, pure).

Model (per offer): interruptions arrive as a Poisson process with rate λ (hazard_per_hour).
Work is split into segments of τ hours of work followed by a checkpoint costing C hours; after
an interruption the job restarts (R hours, not itself interrupted) from the last checkpoint.
The expected time to get one segment of length s = τ + C done is (1/λ + R)(e^{λs} - 1)
(the classic result for restart-from-checkpoint), so for W hours of work, W/τ segments:

    E[wall] = (W/τ) (1/λ + R) (e^{λs} - 1)
    parts:  work = W,  checkpoints = (W/τ) C,
            restarts = N R  with N = (W/τ)(e^{λs} - 1) expected interruptions,
            lost_work = E[wall] - work - checkpoints - restarts

τ defaults to the Young/Daly optimum sqrt(2C/λ). When τ >= W the job runs in one segment
without checkpoints (s = W, no checkpoint cost). With λ = 0 (on-demand) E[wall] = W (+ the
checkpoint cost when the user fixed an interval). Cost = price/h * E[wall].

Offers that would give a nonsense rank are dropped, with the reason counted (see RankReport):
a spot price at or above the same offer's on-demand price (the on-demand row is strictly better),
a missing or non-positive price, a region the user excluded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pricing.errors import NoOfferError, PricingInputError, UnknownNameError
from pricing.expected_cost import expected_cost_usd
from pricing.gpus import gpu_family
from pricing.models import Offer, OfferQuery, ScoredOffer
from pricing.no_offer import explain_no_offer
from pricing.table import OfferTable

if TYPE_CHECKING:  # either catalog type: pandas-backed (pricing.catalog) or compiled (pricing.compiled)
    from pricing.catalog import Catalog
    from pricing.compiled import OfferCatalog

_MAX_EXPONENT = 700.0  # e^700 is near float max; such offers are hopeless anyway


@dataclass(frozen=True)
class ExpectedTime:
    """Arrays (one entry per offer), in hours."""

    checkpoint_hours: np.ndarray  # τ used (inf = no checkpoints)
    expected_hours: np.ndarray
    work: np.ndarray
    checkpoints: np.ndarray
    lost_work: np.ndarray
    restarts: np.ndarray


def expected_time(
    hazard_per_hour: np.ndarray | float,
    work_hours: float,
    *,
    checkpoint_hours: float | None = None,
    checkpoint_cost_hours: float = 1.0 / 60,
    restart_hours: float = 5.0 / 60,
) -> ExpectedTime:
    """Expected wall time and its parts for each hazard (see module docstring)."""
    lam = np.atleast_1d(np.asarray(hazard_per_hour, dtype="float64"))
    W, C, R = float(work_hours), float(checkpoint_cost_hours), float(restart_hours)
    n = lam.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if checkpoint_hours is None:
            tau = np.where(lam > 0, np.sqrt(2.0 * C / lam), np.inf)
        else:
            tau = np.full(n, float(checkpoint_hours))
        single = tau >= W  # one segment, no checkpoint needed
        segments = np.where(single, 1.0, W / tau)
        seg_len = np.where(single, W, tau + C)
        ckpt = np.where(single, 0.0, segments * C)
        x = np.minimum(lam * seg_len, _MAX_EXPONENT)
        em1 = np.expm1(x)
        failures = segments * em1
        # (e^{λs}-1)/λ -> s as λ -> 0
        per_seg = np.where(lam > 0, em1 / np.where(lam > 0, lam, 1.0), seg_len)
        total = segments * per_seg + failures * R
        lost = np.where(np.isfinite(total), np.maximum(total - W - ckpt - failures * R, 0.0), np.inf)
    return ExpectedTime(
        checkpoint_hours=np.where(single, np.inf, tau),
        expected_hours=total,
        work=np.full(n, W),
        checkpoints=ckpt,
        lost_work=lost,
        restarts=failures * R,
    )


def score_offer(offer: Offer, hazard_per_hour: float, interruption_band: str, query: OfferQuery) -> ScoredOffer:
    """One offer from outside the catalog (a declared cluster) scored by the same model."""
    et = expected_time(
        hazard_per_hour,
        query.work_hours,
        checkpoint_hours=None if query.checkpoint_minutes is None else query.checkpoint_minutes / 60.0,
        checkpoint_cost_hours=query.checkpoint_cost_minutes / 60.0,
        restart_hours=query.restart_overhead_minutes / 60.0,
    )
    hours = float(et.expected_hours[0])
    tau = float(et.checkpoint_hours[0])
    return ScoredOffer(
        offer=offer,
        rank=0,
        hazard_per_hour=hazard_per_hour,
        interruption_band=interruption_band,
        checkpoint_minutes=tau * 60.0 if math.isfinite(tau) else None,
        expected_hours=hours,
        expected_cost_usd=expected_cost_usd(offer.price_usd_per_hour, hours),
        parts={
            "work_hours": float(et.work[0]),
            "checkpoint_hours": float(et.checkpoints[0]),
            "lost_work_hours": float(et.lost_work[0]),
            "restart_hours": float(et.restarts[0]),
        },
    )


@dataclass(frozen=True)
class RankReport:
    """The ranked offers and why others were left out."""

    offers: list[ScoredOffer]
    matched: int  # rows passing the filters, before sanity drops
    dropped: dict[str, int] = field(default_factory=dict)


def rank_offers(catalog: Catalog | OfferCatalog, query: OfferQuery, *, limit: int | None = None) -> list[ScoredOffer]:
    """Offers matching `query`, best (lowest expected cost to finish) first.

    Raises UnknownNameError for an unknown cloud/region and NoOfferError when nothing matches.
    """
    return explain_offers(catalog, query, limit=limit).offers


def explain_offers(catalog: Catalog | OfferCatalog, query: OfferQuery, *, limit: int | None = None) -> RankReport:
    table: OfferTable = catalog.table
    _validate(catalog, query)
    mask, dropped = _filter(table, query)
    rows = np.flatnonzero(mask)
    if not len(rows):
        raise _no_offer(table, query, dropped)
    order, t, cost, late = _score(table, rows, query, limit)
    if late:
        dropped["expected to miss the deadline"] = late
    if not len(order):
        raise _no_offer(table, query, dropped)
    return RankReport(offers=_to_scored(table, rows, order, t, cost), matched=len(rows), dropped=dropped)


def _score(table: OfferTable, rows: np.ndarray, query: OfferQuery, limit: int | None):
    """Score the rows; the order (positions into `rows`) of the best `limit`, best first.

    Ties: cost, then price, then on-demand before spot, then names (codes index sorted names,
    missing first), so the order is stable and platform independent.
    """
    t = expected_time(
        table.floats["hazard_per_hour"][rows],
        query.work_hours,
        checkpoint_hours=None if query.checkpoint_minutes is None else query.checkpoint_minutes / 60.0,
        checkpoint_cost_hours=query.checkpoint_cost_minutes / 60.0,
        restart_hours=query.restart_overhead_minutes / 60.0,
    )
    price = table.floats["price_usd_per_hour"][rows]
    cost = expected_cost_usd(price, t.expected_hours)
    primary = np.round(cost, 9)
    pick = np.arange(len(rows))
    late = 0
    if query.deadline_hours is not None:
        on_time = t.expected_hours <= query.deadline_hours
        late = int((~on_time).sum())
        pick = pick[on_time]
    if limit is not None and 0 < limit < len(pick):
        # Only rows whose cost is at most the limit-th smallest can be in the top `limit`
        # (ties included): sort those instead of every row.
        threshold = np.partition(primary[pick], limit - 1)[limit - 1]
        if not np.isnan(threshold):
            pick = pick[primary[pick] <= threshold]
    r = rows[pick]
    order = pick[
        np.lexsort(
            (
                table.codes["instance_type"][r],
                table.codes["zone"][r],
                table.codes["region"][r],
                table.codes["cloud"][r],
                table.spot[r],
                price[pick],
                primary[pick],
            )
        )
    ]
    if limit is not None:
        order = order[:limit]
    return order, t, cost, late


def _validate(catalog, query: OfferQuery) -> None:
    if query.work_hours <= 0:
        raise PricingInputError("work hours must be positive")
    if query.checkpoint_minutes is not None and query.checkpoint_minutes <= 0:
        raise PricingInputError("checkpoint interval must be positive")
    if query.checkpoint_cost_minutes < 0 or query.restart_overhead_minutes < 0:
        raise PricingInputError("checkpoint cost and restart overhead must not be negative")
    for c in query.clouds or ():
        if c not in catalog.sources:
            from pricing.sources import SUPPORTED_CLOUDS

            if c in SUPPORTED_CLOUDS:
                raise PricingInputError(
                    f"no {c} catalog is loaded",
                    hint=f"run `launcher catalog refresh --clouds {c}` or use --catalog-dir",
                )
            raise UnknownNameError("cloud", c, catalog.sources, extra=" (not in the loaded catalog)")
    wanted = (*(query.regions or ()), *query.exclude_regions)
    known_regions = catalog.regions(query.clouds) if wanted else ()
    for r in wanted:
        if r not in known_regions:
            where = f" for {', '.join(query.clouds)}" if query.clouds else ""
            if len(known_regions) <= 12:
                where += f" (known: {', '.join(known_regions)})"
            raise UnknownNameError("region", r, known_regions, extra=where)


def gpu_mask(table: OfferTable, q: OfferQuery) -> np.ndarray:
    """Rows of any requested GPU shape (all rows when the query names none)."""
    if q.gpus is None:
        return np.ones(len(table), dtype=bool)
    gmask = np.zeros(len(table), dtype=bool)
    count = table.accelerator_count
    for g in q.gpus:
        # A family name matches its variants; a variant name matches itself only.
        col = "accelerator_family" if gpu_family(g.name) == g.name else "accelerator"
        gmask |= table.eq(col, g.name) & (count == g.count)
    return gmask


def filter_steps(table: OfferTable, q: OfferQuery) -> list[tuple[str, np.ndarray]]:
    """The user's filters in order, each as (what it asks for, rows it keeps)."""
    steps: list[tuple[str, np.ndarray]] = []
    if q.spot is not None:
        steps.append(("spot" if q.spot else "on-demand", table.spot == q.spot))
    if q.clouds:
        steps.append((f"--cloud {','.join(q.clouds)}", table.isin("cloud", q.clouds)))
    if q.regions:
        steps.append((f"--region {','.join(q.regions)}", table.isin("region", q.regions)))
    if q.zones:
        steps.append((f"zone {','.join(q.zones)}", table.isin("zone", q.zones)))
    if q.instance_types:
        steps.append((f"instance type {','.join(q.instance_types)}", table.isin("instance_type", q.instance_types)))
    for col, label, minimum in (
        ("gpu_memory_gib", "GPU memory >= {:g} GiB", q.min_gpu_memory_gib),
        ("vcpus", "vCPUs >= {:g}", q.min_vcpus),
        ("memory_gib", "memory >= {:g} GiB", q.min_memory_gib),
    ):
        if minimum is not None:
            steps.append((label.format(minimum), np.nan_to_num(table.floats[col], nan=-1.0) >= minimum))
    return steps


def _filter(table: OfferTable, q: OfferQuery) -> tuple[np.ndarray, dict[str, int]]:
    dropped: dict[str, int] = {}
    mask = gpu_mask(table, q)
    for _, keep in filter_steps(table, q):
        mask &= keep
    if q.exclude_regions:
        excl = mask & table.isin("region", q.exclude_regions)
        _count(dropped, "in an excluded region", excl)
        mask &= ~excl
    price = table.floats["price_usd_per_hour"]
    bad_price = mask & ~(price > 0)  # NaN or <= 0
    _count(dropped, "no usable price", bad_price)
    od = table.floats["on_demand_price_usd_per_hour"]
    spot_not_cheaper = mask & table.spot & (price >= od)  # NaN on-demand compares False: kept
    _count(dropped, "spot price not below on-demand (take the on-demand offer)", spot_not_cheaper)
    mask &= ~(bad_price | spot_not_cheaper)
    if q.max_price_usd_per_hour is not None:
        over = mask & (price > q.max_price_usd_per_hour)
        _count(dropped, f"above max price ${q.max_price_usd_per_hour:g}/h", over)
        mask &= ~over
    return mask, dropped


def _count(dropped: dict[str, int], reason: str, mask: np.ndarray) -> None:
    n = int(mask.sum())
    if n:
        dropped[reason] = dropped.get(reason, 0) + n


def _no_offer(table: OfferTable, q: OfferQuery, dropped: dict[str, int]) -> NoOfferError:
    message, hint = explain_no_offer(table, q, dropped, gpu_mask(table, q), filter_steps(table, q))
    return NoOfferError(message, hint=hint)


def _to_scored(table: OfferTable, rows: np.ndarray, order: np.ndarray, t: ExpectedTime, cost: np.ndarray):
    picked = rows[order]
    text = {c: table.text(c, picked) for c in ("cloud", "region", "zone", "instance_type", "accelerator")}
    band = table.text("interruption_band", picked)
    f = {c: table.floats[c][picked].tolist() for c in table.floats}
    counts = table.accelerator_count[picked].tolist()
    spot = table.spot[picked].tolist()
    ckpt = t.checkpoint_hours[order].tolist()
    hours = t.expected_hours[order].tolist()
    parts = {
        "work_hours": t.work[order].tolist(),
        "checkpoint_hours": t.checkpoints[order].tolist(),
        "lost_work_hours": t.lost_work[order].tolist(),
        "restart_hours": t.restarts[order].tolist(),
    }
    costs = cost[order].tolist()
    out = []
    for i in range(len(picked)):
        offer = Offer(
            cloud=text["cloud"][i] or "",
            region=text["region"][i] or "",
            zone=text["zone"][i],
            instance_type=text["instance_type"][i] or "",
            accelerator=text["accelerator"][i],
            accelerator_count=int(counts[i]),
            vcpus=_num(f["vcpus"][i]),
            memory_gib=_num(f["memory_gib"][i]),
            gpu_memory_gib=_num(f["gpu_memory_gib"][i]),
            spot=bool(spot[i]),
            price_usd_per_hour=float(f["price_usd_per_hour"][i]),
            on_demand_price_usd_per_hour=_num(f["on_demand_price_usd_per_hour"][i]),
        )
        ckpt_h = ckpt[i]
        out.append(
            ScoredOffer(
                offer=offer,
                rank=i + 1,
                hazard_per_hour=float(f["hazard_per_hour"][i]),
                interruption_band=str(band[i]),
                checkpoint_minutes=None if not math.isfinite(ckpt_h) else ckpt_h * 60.0,
                expected_hours=float(hours[i]),
                expected_cost_usd=float(costs[i]),
                parts={k: float(v[i]) for k, v in parts.items()},
            )
        )
    return out


def _num(v: float) -> float | None:
    return None if v != v else float(v)


def offers_as_records(
    scored: Sequence[ScoredOffer],
    enabled: dict[str, bool] | None = None,
    as_of: dict[str, str | None] | None = None,
) -> list[dict]:
    """JSON-ready dicts (used by `launcher offers --json`); `as_of`: when each cloud's prices were read."""
    from pricing.explain_words import interruption_source

    out = []
    for s in scored:
        o = s.offer
        rec = {
            "rank": s.rank,
            "cloud": o.cloud,
            "region": o.region,
            "zone": o.zone,
            "instance_type": o.instance_type,
            "accelerator": o.accelerator,
            "accelerator_count": o.accelerator_count,
            "vcpus": o.vcpus,
            "memory_gib": o.memory_gib,
            "gpu_memory_gib": o.gpu_memory_gib,
            "spot": o.spot,
            "price_usd_per_hour": o.price_usd_per_hour,
            "on_demand_price_usd_per_hour": o.on_demand_price_usd_per_hour,
            "hazard_per_hour": s.hazard_per_hour,
            "interruption_band": s.interruption_band,
            "interruption_source": interruption_source(s.interruption_band),
            "checkpoint_minutes": s.checkpoint_minutes,
            "expected_hours": s.expected_hours,
            "expected_cost_usd": s.expected_cost_usd,
            "parts": s.parts,
        }
        if as_of is not None:
            rec["price_as_of"] = as_of.get(o.cloud)
        if enabled is not None:
            rec["enabled"] = bool(enabled.get(o.cloud, False))
        out.append(rec)
    return out
