"""Declared clusters (`launcher clusters`) as rows of `launcher offers`, ranked with the catalog's."""

from __future__ import annotations

from dataclasses import replace

from pricing.models import OfferQuery


def declared_records(query: OfferQuery) -> list[dict]:
    """Every declared cluster that fits the query (reachable or not), as offer records with
    `enabled` (SkyPilot's config names it) and `reason`."""
    from launcher import paths

    if not paths.clusters_file().exists():  # none declared: skip the clusters' models and YAML
        return []
    from launcher.clusters import CLUSTER_KINDS
    from launcher.clusters.offers import scored_offers
    from launcher.planning.declared import load_declared
    from pricing.rank import offers_as_records

    clusters, reach = load_declared()
    if not clusters.clusters:
        return []
    wanted = tuple("kubernetes" if c == "k8s" else c for c in (query.clouds or CLUSTER_KINDS))
    kinds = tuple(k for k in CLUSTER_KINDS if k in wanted)
    if not kinds:
        return []
    scored = scored_offers(clusters, replace(query, clouds=kinds))
    records = offers_as_records(scored)
    for rec in records:
        r = reach[rec["region"]]
        rec["enabled"] = r.enabled
        rec["reason"] = r.reason
    return records


def merge_records(catalog: list[dict], declared: list[dict], limit: int | None) -> list[dict]:
    merged = sorted([*catalog, *declared], key=lambda r: (round(r["expected_cost_usd"], 9), r["price_usd_per_hour"]))
    if limit:
        merged = merged[:limit]
    for i, r in enumerate(merged, 1):
        r["rank"] = i
    return merged
