"""The offers service: `offers(query) -> OffersResult`, the catalog's clouds and the user's
declared clusters ranked together by expected cost to finish. `launcher offers` renders its
result; `make_plan` ranks each alternative of a task with it.

Two views of the same ranking:
* listing (`launcher offers`): every declared cluster that fits, reachable or not (a row says
  which), the catalog's clouds with `enabled` = credentials found, the best `limit`; a cloud
  name the catalog does not know is an error with "did you mean".
* launch (`OffersQuery.launch=True`, make_plan): only clusters SkyPilot can reach, only clouds
  the catalog prices; nothing that fits is an error saying why.

Kept light at import (pricing's compiled table is numpy only): no pandas, no pydantic models
unless clusters are declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.errors import NoOfferError
from pricing.clouds import DECLARED_CLUSTER_KINDS, canonical_cloud
from pricing.errors import NoOfferError as NothingRanked
from pricing.models import OfferQuery, ScoredOffer  # OfferQuery: the filters of an OffersQuery

if TYPE_CHECKING:
    from launcher.clusters.models import ClustersFile
    from launcher.clusters.offers import Reachability
    from pricing.compiled import OfferCatalog
    from pricing.sources import CatalogSource


@dataclass(frozen=True)
class Declared:
    """The declared clusters and whether SkyPilot's config names each (by cluster name)."""

    clusters: ClustersFile
    reach: Mapping[str, Reachability]


@dataclass(frozen=True)
class OffersQuery:
    """What to rank: pricing's filters and horizon, plus where from and how many.

    `gpu_names`: `--gpus` words (NAME[:COUNT], 'A|B:N'), checked against the catalog's names
    and put in `filters.gpus`. `declared`: already loaded clusters (else read when a clusters
    file exists)."""

    filters: OfferQuery = field(default_factory=OfferQuery)
    gpu_names: tuple[str, ...] = ()
    limit: int | None = None
    catalog_dir: Path | None = None
    launch: bool = False
    declared: Declared | None = None


@dataclass(frozen=True)
class OfferRow:
    """One ranked offer. `enabled`: credentials found (a declared cluster: reachable), known in
    the listing view; `price_as_of`: when the catalog read its price; `cluster_reason`: for a
    declared cluster, where SkyPilot's config names it or why it cannot reach it."""

    scored: ScoredOffer
    enabled: bool | None = None
    price_as_of: str | None = None
    cluster_reason: str | None = None

    @property
    def declared(self) -> bool:
        return self.cluster_reason is not None

    def risk_words(self) -> str:
        """The interruption risk and where it comes from, e.g. '~10%/day, estimate (gcp publishes no rate)'."""
        from pricing.explain_words import interruption_words

        s = self.scored
        return interruption_words(s.offer.cloud, s.interruption_band, s.hazard_per_hour)

    def as_record(self) -> dict[str, Any]:
        """The JSON object of `launcher offers --json` (its fields are a contract)."""
        from pricing.rank import offers_as_records

        if self.declared:
            rec = offers_as_records([self.scored])[0]
            rec["enabled"] = bool(self.enabled)
            rec["reason"] = self.cluster_reason
            return rec
        enabled = None if self.enabled is None else {self.scored.offer.cloud: self.enabled}
        return offers_as_records([self.scored], enabled, {self.scored.offer.cloud: self.price_as_of})[0]


@dataclass(frozen=True)
class OffersResult:
    """Ranked offers, best first (rank 1..n), and what the ranking left out."""

    rows: tuple[OfferRow, ...]
    matched: int  # catalog offers passing the filters, before the limit (declared rows: len(rows))
    dropped: Mapping[str, int] = field(default_factory=dict)  # why other catalog rows were left out
    sources: Mapping[str, CatalogSource] = field(default_factory=dict)  # the catalog's files per cloud

    @property
    def scored(self) -> list[ScoredOffer]:
        return [r.scored for r in self.rows]

    @property
    def declared_rows(self) -> tuple[OfferRow, ...]:
        return tuple(r for r in self.rows if r.declared)

    def stale_note(self) -> str | None:
        """A line naming the shown clouds whose prices are older than a week, if any."""
        from pricing.explain_words import stale_note

        shown = {r.scored.offer.cloud for r in self.rows}
        return stale_note({c: s.as_of for c, s in self.sources.items() if c in shown})


def load_catalog(catalog_dir: Path | None) -> OfferCatalog:
    """The compiled offers table (numpy only; pandas parses the sources once when they change)."""
    from launcher import paths
    from pricing.compiled import load_offer_catalog

    return load_offer_catalog(catalog_dir, cache_dir=paths.catalog_cache_dir(), risk_file=paths.risk_file())


def load_declared() -> Declared:
    from launcher.clusters import load_clusters
    from launcher.clusters.offers import reachability_all

    clusters = load_clusters()
    return Declared(clusters, reachability_all(clusters))


def offers(query: OffersQuery) -> OffersResult:
    if query.launch:
        return _launch_view(query)
    return _listing_view(query)


def _with_gpus(query: OffersQuery, catalog: OfferCatalog) -> OfferQuery:
    if not query.gpu_names:
        return query.filters
    from pricing.gpus import parse_gpus

    return replace(query.filters, gpus=parse_gpus(list(query.gpu_names), known=catalog.accelerators()))


def _sorted(rows: list[OfferRow], limit: int | None) -> tuple[OfferRow, ...]:
    merged = sorted(rows, key=lambda r: (round(r.scored.expected_cost_usd, 9), r.scored.offer.price_usd_per_hour))
    if limit:
        merged = merged[:limit]
    return tuple(replace(r, scored=replace(r.scored, rank=i)) for i, r in enumerate(merged, 1))


def _listing_view(query: OffersQuery) -> OffersResult:
    catalog = load_catalog(query.catalog_dir)
    filters = _with_gpus(query, catalog)
    clouds = None if filters.clouds is None else tuple(dict.fromkeys(canonical_cloud(c) for c in filters.clouds))
    filters = replace(filters, clouds=clouds)
    declared = _declared_rows(query, filters)
    catalog_clouds = None if clouds is None else tuple(c for c in clouds if c not in DECLARED_CLUSTER_KINDS)
    report = None
    if catalog_clouds is None or catalog_clouds:
        from pricing.rank import explain_offers

        try:
            report = explain_offers(catalog, replace(filters, clouds=catalog_clouds), limit=query.limit or None)
        except NothingRanked:
            if not declared:
                raise
    rows: list[OfferRow] = list(declared)
    if report is not None:
        from launcher.providers.detect import enabled_clouds

        enabled = {name: st.enabled for name, st in enabled_clouds().items()}
        as_of = {c: s.as_of for c, s in catalog.sources.items()}
        mine = [OfferRow(s, bool(enabled.get(s.offer.cloud, False)), as_of.get(s.offer.cloud)) for s in report.offers]
        rows = mine + rows  # the catalog's first on a tie
    return OffersResult(
        rows=_sorted(rows, query.limit or None),
        matched=report.matched if report else 0,
        dropped=dict(report.dropped) if report else {},
        sources=dict(catalog.sources),
    )


def _declared_rows(query: OffersQuery, filters: OfferQuery) -> list[OfferRow]:
    """Every declared cluster that fits (reachable or not), scored. No clusters file: none, and
    neither their models nor YAML are loaded."""
    if query.declared is None:
        from launcher import paths

        if not paths.clusters_file().exists():
            return []
    declared = query.declared or load_declared()
    if not declared.clusters.clusters:
        return []
    kinds = tuple(k for k in DECLARED_CLUSTER_KINDS if filters.clouds is None or k in filters.clouds)
    if not kinds:
        return []
    from launcher.clusters.offers import scored_offers

    out = []
    for s in scored_offers(declared.clusters, replace(filters, clouds=kinds)):
        r = declared.reach[s.offer.region]
        out.append(OfferRow(s, r.enabled, None, r.reason))
    return out


def _why_not(declared, kinds: tuple[str, ...], filters: OfferQuery) -> str:
    """': slurm/c1: it has no GPU ...; slurm/c2: not reachable: ...' for the declared clusters of `kinds`."""
    from launcher.clusters.offers import misfit

    parts = []
    for c in declared.clusters.clusters:
        if c.kind not in kinds:
            continue
        r = declared.reach.get(c.name)
        why = misfit(c, filters) or (f"not reachable: {r.reason}" if r is not None and not r.enabled else None)
        if why:
            parts.append(f"{c.kind}/{c.name}: {why}")
    return (": " + "; ".join(parts)) if parts else ""


def _launch_view(query: OffersQuery) -> OffersResult:
    """Ranked offers a launch may use: reachable declared clusters of the kinds asked, and the
    catalog's prices for the other clouds asked."""
    filters = query.filters
    clouds = tuple(filters.clouds or ())
    declared = query.declared
    has_clusters = declared is not None and bool(declared.clusters.clusters)
    kinds = tuple(c for c in clouds if c in DECLARED_CLUSTER_KINDS) if has_clusters else ()
    if not kinds:
        return _catalog_for_launch(query, clouds)
    from launcher.clusters.offers import scored_offers

    mine = [OfferRow(s) for s in scored_offers(declared.clusters, replace(filters, clouds=kinds), declared.reach)]
    rest = tuple(c for c in clouds if c not in kinds)
    theirs: OffersResult | None = None
    error: NoOfferError | NothingRanked | None = None
    if rest:
        try:
            theirs = _catalog_for_launch(query, rest)
        except (NoOfferError, NothingRanked) as e:  # the catalog's own error or ours
            error = e
    if not mine and not (theirs and theirs.rows):
        if error is not None and not any(c.kind in kinds for c in declared.clusters.clusters):
            raise error
        raise NoOfferError(f"no declared {'/'.join(kinds)} cluster fits{_why_not(declared, kinds, filters)} (launcher clusters list)")
    rows = _sorted([*mine, *(theirs.rows if theirs else ())], None)  # a declared cluster first on a tie
    return OffersResult(
        rows=rows,
        matched=len(mine) + (theirs.matched if theirs else 0),
        dropped=theirs.dropped if theirs else {},
        sources=theirs.sources if theirs else {},
    )


def _catalog_for_launch(query: OffersQuery, clouds: tuple[str, ...]) -> OffersResult:
    catalog = load_catalog(query.catalog_dir)
    known = set(catalog.clouds)
    priced = tuple(c for c in clouds if c in known)
    if not priced:
        raise NoOfferError(f"the catalog has no prices for {', '.join(clouds)}")
    from pricing.rank import explain_offers

    report = explain_offers(catalog, replace(_with_gpus(query, catalog), clouds=priced), limit=query.limit or None)
    return OffersResult(
        rows=tuple(OfferRow(s) for s in report.offers),
        matched=report.matched,
        dropped=dict(report.dropped),
        sources=dict(catalog.sources),
    )
