"""Declared clusters in the plan: which kinds are enabled (a reachable cluster of that kind) and
the ranking of queries that name them, merged with the catalog's by expected cost to finish."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from launcher.clusters import CLUSTER_KINDS, ClustersFile, load_clusters
from launcher.clusters.offers import Reachability, reachability_all, scored_offers
from launcher.errors import NoOfferError
from launcher.providers.base import CredentialStatus
from pricing.errors import NoOfferError as NothingRanked
from pricing.models import OfferQuery, ScoredOffer


def declared_statuses(clusters: ClustersFile, reach: dict[str, Reachability]) -> dict[str, CredentialStatus]:
    """Per infra kind with a declared cluster: enabled when one of them is reachable."""
    out: dict[str, CredentialStatus] = {}
    for kind in CLUSTER_KINDS:
        entries = [c for c in clusters.clusters if c.kind == kind]
        if not entries:
            continue
        ok = [c.name for c in entries if reach[c.name].enabled]
        if ok:
            out[kind] = CredentialStatus(kind, True, "declared clusters: " + ", ".join(ok))
        else:
            out[kind] = CredentialStatus(kind, False, "; ".join(f"{c.name} not reachable: {reach[c.name].reason}" for c in entries))
    return out


def load_declared() -> tuple[ClustersFile, dict[str, Reachability]]:
    clusters = load_clusters()
    return clusters, reachability_all(clusters)


def with_declared(
    rank_catalog: Callable[[OfferQuery], list[ScoredOffer]], clusters: ClustersFile, reach: dict[str, Reachability]
) -> Callable[[OfferQuery], list[ScoredOffer]]:
    """A ranker that answers declared-cluster kinds itself and the rest from the catalog."""

    def rank(query: OfferQuery) -> list[ScoredOffer]:
        clouds = tuple(query.clouds or ())
        kinds = tuple(c for c in clouds if c in CLUSTER_KINDS)
        if not kinds:
            return rank_catalog(query)
        mine = scored_offers(clusters, replace(query, clouds=kinds), reach)
        rest = tuple(c for c in clouds if c not in CLUSTER_KINDS)
        theirs: list[ScoredOffer] = []
        error: NoOfferError | NothingRanked | None = None
        if rest:
            try:
                theirs = rank_catalog(replace(query, clouds=rest))
            except (NoOfferError, NothingRanked) as e:  # the catalog's own error or ours
                error = e
        if not mine and not theirs:
            if error is not None and not any(c.kind in kinds for c in clusters.clusters):
                raise error
            raise NoOfferError(f"no declared {'/'.join(kinds)} cluster fits (launcher clusters list)")
        merged = sorted([*mine, *theirs], key=lambda s: (round(s.expected_cost_usd, 9), s.offer.price_usd_per_hour))
        return [replace(s, rank=i) for i, s in enumerate(merged, 1)]

    return rank
