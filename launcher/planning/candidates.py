"""From a task spec to ranked candidates: every `any_of`/`ordered` alternative x the offers of
enabled providers, best expected cost first.

Ordering rules (documented in docs/guides/launching.md):
* `any_of`: all candidates ranked together by expected cost to finish (then price).
* `ordered`: alternatives in the order written; within one alternative, by expected cost.
* The local backend (free, CPU only) is a candidate for an alternative that says `infra: local`,
  and for a CPU-only alternative with no cloud named. When the job asks for a GPU, an `any_of`
  ranking lists local *after* every cloud offer: free CPU time must not beat a GPU the user
  asked for. (`ordered` honors the user's order, local included.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from launcher.errors import CredentialsError, NoOfferError
from pricing.clouds import PRICED_ONLY_CLOUDS, PROVIDER_CLOUDS
from pricing.errors import NoOfferError as NothingRanked
from launcher.spec.loader import LoadedSpec
from launcher.spec.models import ResourceFields
from pricing.models import GpuRequest, Offer, OfferQuery, ScoredOffer
from pricing.expected_cost import expected_cost_usd

DEFAULT_EXPECTED_HOURS = 1.0
MAX_CANDIDATES = 30  # the plan keeps the best N (recovery walks these); local is always kept


@dataclass(frozen=True)
class Candidate:
    scored: ScoredOffer
    alternative: int  # index into spec.resources.alternatives()


@dataclass(frozen=True)
class Overrides:
    """Command-line narrowing: `--cloud`, `--spot/--on-demand`."""

    clouds: tuple[str, ...] | None = None
    spot: bool | None = None


def expected_work_hours(loaded: LoadedSpec) -> float:
    return loaded.spec.launcher.expected_hours or DEFAULT_EXPECTED_HOURS


def query_for(alt: ResourceFields, loaded: LoadedSpec, clouds: tuple[str, ...], overrides: Overrides) -> OfferQuery:
    lb = loaded.spec.launcher
    place = alt.placement()
    gpus = tuple(GpuRequest(n, c) for n, c in alt.accelerators) if alt.accelerators else None
    spot = overrides.spot if overrides.spot is not None else alt.use_spot
    max_prices = [p for p in (lb.max_price_usd_per_hour, alt.max_hourly_cost) if p is not None]
    return OfferQuery(
        gpus=gpus,
        spot=spot,
        clouds=clouds,
        regions=(place.region,) if place.region else None,
        zones=(place.zone,) if place.zone else None,
        instance_types=(alt.instance_type,) if alt.instance_type else None,
        min_vcpus=alt.min_vcpus,
        min_memory_gib=alt.min_memory_gib,
        max_price_usd_per_hour=min(max_prices) if max_prices else None,
        work_hours=expected_work_hours(loaded),
        checkpoint_minutes=lb.checkpoint.interval_minutes if lb.checkpoint else None,
        **({"checkpoint_cost_minutes": lb.checkpoint.cost_minutes} if lb.checkpoint and lb.checkpoint.cost else {}),
        deadline_hours=lb.deadline_hours,
    )


def local_scored(offer: Offer, work_hours: float) -> ScoredOffer:
    """The local offer scored: never interrupted unless simulated, time = work hours, free
    unless a simulation gives it a notional price."""
    return ScoredOffer(
        offer=offer,
        rank=0,
        hazard_per_hour=0.0,
        interruption_band="local" if not offer.spot else "simulated",
        checkpoint_minutes=None,
        expected_hours=work_hours,
        expected_cost_usd=expected_cost_usd(offer.price_usd_per_hour, work_hours),
        parts={"work_hours": work_hours},
    )


def local_group(offer: Offer, work_hours: float, overrides: Overrides, index: int,
                zones: tuple[str, ...] = ()) -> list[Candidate]:  # fmt: skip
    """The local candidates of one alternative: the offer, or one per simulated spot zone (in the
    order given). Simulated spot capacity priced with a dearer on-demand price (`--simulate-price
    SPOT,ON_DEMAND`) also offers its on-demand variant (never preempted) right after them, so a
    recovery policy can move to on-demand as on a cloud."""
    offers = [replace(offer, zone=z) for z in zones] if offer.spot and zones else [offer]
    group = [Candidate(local_scored(o, work_hours), index) for o in offers]
    od_price = offer.on_demand_price_usd_per_hour
    if offer.spot and overrides.spot is not True and od_price is not None and od_price > offer.price_usd_per_hour:
        od = replace(offer, spot=False, price_usd_per_hour=od_price)
        group.append(Candidate(local_scored(od, work_hours), index))
    return group


def rank_candidates(
    loaded: LoadedSpec,
    *,
    enabled: Mapping[str, bool],
    local_offer: Offer,
    rank_cloud: Callable[[OfferQuery], list[ScoredOffer]],
    overrides: Overrides = Overrides(),
    local_zones: tuple[str, ...] = (),
) -> tuple[list[Candidate], list[str]]:
    """Ranked candidates plus the reasons alternatives produced nothing.

    `rank_cloud` ranks a query against the catalog (pricing.rank_offers); it is only called
    for alternatives that can use an enabled cloud, so a local-only launch never loads the
    catalog. Raises CredentialsError when clouds were named but none is enabled, NoOfferError
    when nothing matches at all.
    """
    spec = loaded.spec
    alts = spec.resources.alternatives()
    ordered = spec.resources.is_ordered
    gpu_job = spec.wants_gpu
    work_hours = expected_work_hours(loaded)
    cloud_groups: list[list[Candidate]] = []
    local_groups: list[list[Candidate]] = []
    reasons: list[str] = []
    disabled_named: list[str] = []
    for i, alt in enumerate(alts):
        place = alt.placement()
        label = f"alternative {i + 1} ({_describe(alt)})" if len(alts) > 1 else _describe(alt)
        allowed = overrides.clouds
        if place.is_local or (place.cloud is None and not alt.accelerators):
            if allowed is None or "local" in allowed:
                why = _local_unfit(alt, local_offer, overrides) or local_nodes_unfit(spec.num_nodes)
                if why:
                    reasons.append(f"{label}: local backend: {why}")
                else:
                    group = local_group(local_offer, work_hours, overrides, i, local_zones)
                    (cloud_groups if ordered else local_groups).append(group)
            if place.is_local:
                continue
        if place.cloud in PRICED_ONLY_CLOUDS:
            reasons.append(f"{label}: {priced_only_text(place.cloud)}")
            continue
        clouds = [place.cloud] if place.cloud else [c for c, on in enabled.items() if on and c != "local"
                                                    and c not in PRICED_ONLY_CLOUDS]  # fmt: skip
        if allowed is not None:
            clouds = [c for c in clouds if c in allowed]
        usable = [c for c in clouds if enabled.get(c)]
        if place.cloud and place.cloud not in usable and (allowed is None or place.cloud in allowed):
            disabled_named.append(place.cloud)
            reasons.append(f"{label}: {place.cloud} has no credentials")
            continue
        if not usable:
            if alt.accelerators and place.cloud is None:
                found = [c for c in PRICED_ONLY_CLOUDS if enabled.get(c) and (allowed is None or c in allowed)]
                also = f" ({', '.join(found)}: credentials found, but no launch runs there)" if found else ""
                reasons.append(f"{label}: no cloud with credentials offers GPUs here{also}")
            continue
        try:
            scored = rank_cloud(query_for(alt, loaded, tuple(usable), overrides))
        except (NoOfferError, NothingRanked) as e:
            reasons.append(f"{label}: {e.message}")
            continue
        cloud_groups.append([Candidate(s, i) for s in scored])
    if ordered:
        merged = [c for g in cloud_groups for c in g]
    else:
        merged = sorted((c for g in cloud_groups for c in g), key=_cost_key)
        # One local group (this machine; with simulated spot also its on-demand variant).
        # Local is free; for a CPU job it wins on cost, for a GPU job it goes last.
        locals_ = local_groups[0] if local_groups else []
        merged = (merged + locals_) if gpu_job else sorted(locals_ + merged, key=_cpu_cost_key)
    merged = _dedupe(merged)
    if len(merged) > MAX_CANDIDATES:
        head = merged[:MAX_CANDIDATES]
        local = [c for c in merged[MAX_CANDIDATES:] if c.scored.offer.cloud == "local"]
        merged = head[: MAX_CANDIDATES - len(local)] + local if local else head
    if not merged:
        allowed = overrides.clouds
        named = [a.placement().cloud for a in alts]
        named = [c for c in named if c not in (None, "local") and (allowed is None or c in allowed)]
        if disabled_named and len(disabled_named) == len(named):
            raise CredentialsError(
                "no offer: " + "; ".join(reasons),
                hint="set up credentials for one of those clouds, or add an `infra: local` alternative",
            )
        raise NoOfferError("no offer for this task: " + "; ".join(reasons) if reasons else "no offer for this task")
    return [replace(c, scored=replace(c.scored, rank=n)) for n, c in enumerate(merged, 1)], reasons


def priced_only_text(cloud: str) -> str:
    """Why a launch does not run on a cloud that is priced but has no provider."""
    return (f"{cloud} is priced (`launcher offers --cloud {cloud}`) but has no provider, so a launch "
            f"cannot run there (it can on {', '.join(PROVIDER_CLOUDS)} or a declared cluster)")  # fmt: skip


def _cost_key(c: Candidate) -> tuple:
    s = c.scored
    local = s.offer.cloud == "local"
    # Clouds: on-demand first on a tie. Local: simulated spot first (its on-demand variant is the
    # fallback a recovery policy moves to).
    return (round(s.expected_cost_usd, 9), s.offer.price_usd_per_hour, local, s.offer.spot != local)


def _cpu_cost_key(c: Candidate) -> tuple:
    """A CPU job: at equal cost this machine comes first (no queue, nothing to provision), e.g.
    before a declared cluster priced at $0."""
    cost, price, local, market = _cost_key(c)
    return (cost, price, not local, market)


def _dedupe(cands: list[Candidate]) -> list[Candidate]:
    seen: set[Offer] = set()
    out = []
    for c in cands:
        if c.scored.offer not in seen:
            seen.add(c.scored.offer)
            out.append(c)
    return out


def _local_unfit(alt: ResourceFields, offer: Offer, overrides: Overrides) -> str | None:
    if overrides.spot is True and not offer.spot:
        return "not spot capacity (--spot)"
    if alt.min_vcpus is not None and offer.vcpus is not None and alt.min_vcpus > offer.vcpus:
        return f"needs {alt.min_vcpus:g} CPUs, this machine has {offer.vcpus:g}"
    if alt.min_memory_gib is not None and offer.memory_gib is not None and alt.min_memory_gib > offer.memory_gib:
        return f"needs {alt.min_memory_gib:g} GiB memory, this machine has {offer.memory_gib:g}"
    return None


def _describe(alt: ResourceFields) -> str:
    bits = []
    place = alt.placement()
    bits.append("/".join(p for p in (place.cloud, place.region, place.zone) if p) or "any cloud")
    if alt.accelerators:
        bits.append(",".join(f"{n}:{c}" for n, c in alt.accelerators))
    if alt.use_spot is not None:
        bits.append("spot" if alt.use_spot else "on-demand")
    return " ".join(bits)


LOCAL_MAX_NODES_ENV = "LAUNCHER_LOCAL_MAX_NODES"


def local_max_nodes() -> int:
    """Ranks the local backend runs at once: $LAUNCHER_LOCAL_MAX_NODES, else max(8, CPUs)."""
    raw = os.environ.get(LOCAL_MAX_NODES_ENV, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            from launcher.errors import BadInputError

            raise BadInputError(f"{LOCAL_MAX_NODES_ENV} must be a positive whole number (got {raw!r})")
        return value
    return max(8, local_cpu_count())


def local_nodes_unfit(num_nodes: int) -> str | None:
    cap = local_max_nodes()
    if num_nodes > cap:
        return f"{num_nodes} ranks asked; this machine runs at most {cap} ({LOCAL_MAX_NODES_ENV} sets the cap)"
    return None


def local_cpu_count() -> int:
    return os.cpu_count() or 1
