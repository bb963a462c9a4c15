"""Declared clusters in the plan: which kinds are enabled (a reachable cluster of that kind).
Their offers are ranked by the offers service (launcher.planning.offers)."""

from __future__ import annotations

from launcher.planning.offers import Declared
from launcher.providers.base import CredentialStatus
from pricing.clouds import DECLARED_CLUSTER_KINDS


def declared_statuses(declared: Declared) -> dict[str, CredentialStatus]:
    """Per infra kind with a declared cluster: enabled when one of them is reachable."""
    clusters, reach = declared.clusters, declared.reach
    out: dict[str, CredentialStatus] = {}
    for kind in DECLARED_CLUSTER_KINDS:
        entries = [c for c in clusters.clusters if c.kind == kind]
        if not entries:
            continue
        ok = [c.name for c in entries if reach[c.name].enabled]
        if ok:
            out[kind] = CredentialStatus(kind, True, "declared clusters: " + ", ".join(ok))
        else:
            out[kind] = CredentialStatus(kind, False, "; ".join(f"{c.name} not reachable: {reach[c.name].reason}" for c in entries))
    return out
