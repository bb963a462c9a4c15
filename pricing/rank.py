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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pricing.errors import NoOfferError, PricingInputError, UnknownNameError
from pricing import frame as fr
from pricing.catalog import Catalog
from pricing.gpus import gpu_family
from pricing.models import Offer, OfferQuery, ScoredOffer

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


@dataclass(frozen=True)
class RankReport:
    """The ranked offers and why others were left out."""

    offers: list[ScoredOffer]
    matched: int  # rows passing the filters, before sanity drops
    dropped: dict[str, int] = field(default_factory=dict)


def rank_offers(catalog: Catalog, query: OfferQuery, *, limit: int | None = None) -> list[ScoredOffer]:
    """Offers matching `query`, best (lowest expected cost to finish) first.

    Raises UnknownNameError for an unknown cloud/region and NoOfferError when nothing matches.
    """
    return explain_offers(catalog, query, limit=limit).offers


def explain_offers(catalog: Catalog, query: OfferQuery, *, limit: int | None = None) -> RankReport:
    _validate(catalog, query)
    df, dropped = _filter(catalog.offers, query)
    if df.empty:
        raise NoOfferError(_no_offer_message(query, dropped), hint=_no_offer_hint(dropped))
    scored, late = score_frame(df, query, limit=limit)
    if late:
        dropped["expected to miss the deadline"] = late
    if scored.empty:
        raise NoOfferError(_no_offer_message(query, dropped), hint=_no_offer_hint(dropped))
    return RankReport(offers=_to_scored(scored), matched=len(df), dropped=dropped)


def score_frame(df: pd.DataFrame, query: OfferQuery, *, limit: int | None = None) -> tuple[pd.DataFrame, int]:
    """The best `limit` rows with expected_hours, expected_cost_usd and the parts, best first.

    Scores and sorts on arrays and only materializes the rows returned. Also returns how many
    offers were left out for missing `query.deadline_hours`.
    """
    t = expected_time(
        df["hazard_per_hour"].to_numpy(dtype="float64"),
        query.work_hours,
        checkpoint_hours=None if query.checkpoint_minutes is None else query.checkpoint_minutes / 60.0,
        checkpoint_cost_hours=query.checkpoint_cost_minutes / 60.0,
        restart_hours=query.restart_overhead_minutes / 60.0,
    )
    price = df["price_usd_per_hour"].to_numpy(dtype="float64")
    cost = price * t.expected_hours
    # Ties: cost, then price, then on-demand before spot, then names (stable, platform independent).
    order = np.lexsort(
        (
            _sort_key(df["instance_type"]),
            _sort_key(df["zone"]),
            _sort_key(df["region"]),
            _sort_key(df["cloud"]),
            df["spot"].to_numpy(),
            price,
            np.round(cost, 9),
        )
    )
    late = 0
    if query.deadline_hours is not None:
        on_time = t.expected_hours[order] <= query.deadline_hours
        late = int((~on_time).sum())
        order = order[on_time]
    if limit is not None:
        order = order[:limit]
    out = df.iloc[order].assign(
        checkpoint_hours=t.checkpoint_hours[order],
        expected_hours=t.expected_hours[order],
        expected_cost_usd=cost[order],
        part_work_hours=t.work[order],
        part_checkpoint_hours=t.checkpoints[order],
        part_lost_work_hours=t.lost_work[order],
        part_restart_hours=t.restarts[order],
    )
    return out, late


def _sort_key(s: pd.Series) -> np.ndarray:
    """Lexical order key; categorical codes when the categories are sorted (fast), missing first."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        if cats.is_monotonic_increasing:
            return s.cat.codes.to_numpy()
    return s.astype(object).fillna("").astype(str).to_numpy()


def _validate(catalog: Catalog, query: OfferQuery) -> None:
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


def _filter(offers: pd.DataFrame, q: OfferQuery) -> tuple[pd.DataFrame, dict[str, int]]:
    dropped: dict[str, int] = {}
    mask = np.ones(len(offers), dtype=bool)
    if q.gpus is not None:
        gmask = np.zeros(len(offers), dtype=bool)
        count = offers["accelerator_count"].to_numpy()
        for g in q.gpus:
            # A family name matches its variants; a variant name matches itself only.
            col = "accelerator_family" if gpu_family(g.name) == g.name else "accelerator"
            gmask |= fr.eq(offers[col], g.name) & (count == g.count)
        mask &= gmask
    if q.spot is not None:
        mask &= offers["spot"].to_numpy() == q.spot
    if q.clouds:
        mask &= fr.isin(offers["cloud"], q.clouds)
    if q.regions:
        mask &= fr.isin(offers["region"], q.regions)
    if q.zones:
        mask &= fr.isin(offers["zone"], q.zones)
    if q.instance_types:
        mask &= fr.isin(offers["instance_type"], q.instance_types)
    for col, minimum in (
        ("gpu_memory_gib", q.min_gpu_memory_gib),
        ("vcpus", q.min_vcpus),
        ("memory_gib", q.min_memory_gib),
    ):
        if minimum is not None:
            mask &= np.nan_to_num(offers[col].to_numpy(dtype="float64"), nan=-1.0) >= minimum
    if q.exclude_regions:
        excl = mask & fr.isin(offers["region"], q.exclude_regions)
        _count(dropped, "in an excluded region", excl)
        mask &= ~excl
    price = offers["price_usd_per_hour"].to_numpy(dtype="float64")
    bad_price = mask & ~(price > 0)  # NaN or <= 0
    _count(dropped, "no usable price", bad_price)
    od = offers["on_demand_price_usd_per_hour"].to_numpy(dtype="float64")
    spot_not_cheaper = mask & offers["spot"].to_numpy() & (price >= od)  # NaN on-demand compares False: kept
    _count(dropped, "spot price not below on-demand (take the on-demand offer)", spot_not_cheaper)
    mask &= ~(bad_price | spot_not_cheaper)
    if q.max_price_usd_per_hour is not None:
        over = mask & (price > q.max_price_usd_per_hour)
        _count(dropped, f"above max price ${q.max_price_usd_per_hour:g}/h", over)
        mask &= ~over
    return offers[mask], dropped


def _count(dropped: dict[str, int], reason: str, mask: np.ndarray) -> None:
    n = int(mask.sum())
    if n:
        dropped[reason] = dropped.get(reason, 0) + n


def _describe(q: OfferQuery) -> str:
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


def _no_offer_message(q: OfferQuery, dropped: dict[str, int]) -> str:
    msg = f"no offer matches ({_describe(q)})"
    if dropped:
        msg += "; left out: " + ", ".join(f"{n} {why}" for why, n in dropped.items())
    return msg


def _no_offer_hint(dropped: dict[str, int]) -> str:
    return "relax a filter (try --any, another --cloud/--region, or another GPU count)"


def _to_scored(df: pd.DataFrame) -> list[ScoredOffer]:
    cols = {c: _column_values(df[c]) for c in df.columns}
    out = []
    for i in range(len(df)):
        zone = cols["zone"][i]
        acc = cols["accelerator"][i]
        offer = Offer(
            cloud=str(cols["cloud"][i]),
            region=str(cols["region"][i]),
            zone=None if _isna(zone) else str(zone),
            instance_type=str(cols["instance_type"][i]),
            accelerator=None if _isna(acc) else str(acc),
            accelerator_count=int(cols["accelerator_count"][i]),
            vcpus=_num(cols["vcpus"][i]),
            memory_gib=_num(cols["memory_gib"][i]),
            gpu_memory_gib=_num(cols["gpu_memory_gib"][i]),
            spot=bool(cols["spot"][i]),
            price_usd_per_hour=float(cols["price_usd_per_hour"][i]),
            on_demand_price_usd_per_hour=_num(cols["on_demand_price_usd_per_hour"][i]),
        )
        ckpt_h = float(cols["checkpoint_hours"][i])
        out.append(
            ScoredOffer(
                offer=offer,
                rank=i + 1,
                hazard_per_hour=float(cols["hazard_per_hour"][i]),
                interruption_band=str(cols["interruption_band"][i]),
                checkpoint_minutes=None if not np.isfinite(ckpt_h) else ckpt_h * 60.0,
                expected_hours=float(cols["expected_hours"][i]),
                expected_cost_usd=float(cols["expected_cost_usd"][i]),
                parts={
                    "work_hours": float(cols["part_work_hours"][i]),
                    "checkpoint_hours": float(cols["part_checkpoint_hours"][i]),
                    "lost_work_hours": float(cols["part_lost_work_hours"][i]),
                    "restart_hours": float(cols["part_restart_hours"][i]),
                },
            )
        )
    return out


def _column_values(s: pd.Series) -> list:
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy()
        used = np.unique(codes[codes >= 0])
        names = dict(zip(used.tolist(), s.cat.categories.take(used).tolist(), strict=True))
        return [names.get(c) for c in codes.tolist()]
    return s.tolist()


def _isna(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _num(v) -> float | None:
    return None if _isna(v) else float(v)


def offers_as_records(scored: Sequence[ScoredOffer], enabled: dict[str, bool] | None = None) -> list[dict]:
    """JSON-ready dicts (used by `launcher offers --json`)."""
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
            "checkpoint_minutes": s.checkpoint_minutes,
            "expected_hours": s.expected_hours,
            "expected_cost_usd": s.expected_cost_usd,
            "parts": s.parts,
        }
        if enabled is not None:
            rec["enabled"] = bool(enabled.get(o.cloud, False))
        out.append(rec)
    return out
