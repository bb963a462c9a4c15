"""Declared clusters as offers, scored by the same expected cost to finish as cloud offers.

An entry becomes one Offer per shape: `cloud` is the SkyPilot infra kind (slurm, kubernetes,
ssh), `region` the cluster's name, `instance_type` 'cluster:<name>', spot = preemptible. Its
price is the internal rate of one node; a preemptible cluster gets the calibrated default
interruption hazard for clouds without published data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from launcher.clusters.models import ClusterEntry, ClustersFile
from pricing.models import Offer, OfferQuery, ScoredOffer

INSTANCE_PREFIX = "cluster:"


@dataclass(frozen=True)
class Reachability:
    enabled: bool
    reason: str


def offer_for(entry: ClusterEntry) -> Offer:
    return Offer(
        cloud=entry.kind,
        region=entry.name,
        zone=None,
        instance_type=INSTANCE_PREFIX + entry.name,
        accelerator=entry.gpu,
        accelerator_count=entry.gpus_per_node,
        vcpus=entry.cpus_per_node,
        memory_gib=entry.memory_gib_per_node,
        gpu_memory_gib=None,
        spot=entry.preemptible,
        price_usd_per_hour=entry.price_usd_per_node_hour_total,
        on_demand_price_usd_per_hour=None,
    )


def _fits(entry: ClusterEntry, q: OfferQuery) -> bool:
    return misfit(entry, q) is None


def misfit(entry: ClusterEntry, q: OfferQuery) -> str | None:
    """Why the declared cluster cannot take the query, in words (None: it fits)."""
    if q.clouds is not None and entry.kind not in q.clouds:
        return f"the task does not ask for {entry.kind}"
    if q.regions is not None and entry.name not in q.regions:
        return f"the task names {', '.join(q.regions)}, not {entry.name}"
    if entry.name in q.exclude_regions:
        return "excluded"
    if q.zones is not None:
        return "the task names zones, which declared clusters do not have"
    if q.instance_types is not None and INSTANCE_PREFIX + entry.name not in q.instance_types:
        return "the task names other instance types"
    if q.spot is not None and q.spot != entry.preemptible:
        return "it is preemptible and the task asks for on-demand" if entry.preemptible else "it is not preemptible and the task asks for spot"
    if q.gpus is not None and not any(g.name == entry.gpu and g.count <= entry.gpus_per_node for g in q.gpus):
        asked = " or ".join(f"{g.name}:{g.count}" for g in q.gpus)
        if not entry.gpu:
            return f"it has no GPU (declared without --gpu) and the task asks for {asked}"
        return f"it has {entry.gpu}:{entry.gpus_per_node} per node and the task asks for {asked}"
    if q.min_vcpus is not None and (entry.cpus_per_node is None or entry.cpus_per_node < q.min_vcpus):
        return f"the task asks for {q.min_vcpus:g}+ CPUs per node; it has {entry.cpus_per_node if entry.cpus_per_node is not None else 'an undeclared number (--cpus)'}"
    if q.min_memory_gib is not None and (entry.memory_gib_per_node is None or entry.memory_gib_per_node < q.min_memory_gib):
        return f"the task asks for {q.min_memory_gib:g}+ GiB per node; it has {entry.memory_gib_per_node if entry.memory_gib_per_node is not None else 'an undeclared amount (--memory-gib)'}"
    if q.max_price_usd_per_hour is not None and entry.price_usd_per_node_hour_total > q.max_price_usd_per_hour:
        return f"its price {entry.price_usd_per_node_hour_total:g} USD/h is above the task's {q.max_price_usd_per_hour:g}"
    return None


def score(entry: ClusterEntry, q: OfferQuery) -> ScoredOffer:
    """Expected time and cost to finish q.work_hours on one node of the cluster (pricing.rank's
    model: Poisson interruptions, restart from the last checkpoint)."""
    from pricing.rank import score_offer
    from pricing.risk import FALLBACK_DEFAULT

    hazard = FALLBACK_DEFAULT if entry.preemptible else 0.0
    band = "preemptible" if entry.preemptible else "not preemptible"
    return score_offer(offer_for(entry), hazard, band, q)


def scored_offers(clusters: ClustersFile, q: OfferQuery, reachable: Mapping[str, Reachability] | None = None) -> list[ScoredOffer]:
    """Matching declared clusters (reachable ones only when `reachable` is given), scored."""
    out = []
    for entry in clusters.clusters:
        if reachable is not None and not reachable.get(entry.name, Reachability(False, "")).enabled:
            continue
        if _fits(entry, q):
            out.append(score(entry, q))
    return out


def reachability(entry: ClusterEntry, env: Mapping[str, str] | None = None, home: Path | None = None) -> Reachability:
    """Cheap check (files only, like providers.detect): does SkyPilot's config name the cluster?
    `launcher clusters check` asks SkyPilot itself."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    kind, target = entry.kind, entry.target
    if kind == "slurm":
        cfg = home / ".slurm" / "config"
        hosts = _ssh_config_hosts(cfg)
        if target in hosts:
            return Reachability(True, f"{cfg} Host {target}")
        return Reachability(False, f"no `Host {target}` in {cfg} (SkyPilot reads Slurm clusters from it)")
    if kind == "kubernetes":
        cfg = Path(env.get("KUBECONFIG", "").split(os.pathsep)[0] or home / ".kube" / "config")
        text = _read(cfg)
        if re.search(rf"^\s*name:\s*['\"]?{re.escape(target)}['\"]?\s*$", text, re.M):
            return Reachability(True, f"{cfg} context {target}")
        return Reachability(False, f"no context {target!r} in {cfg}")
    cfg = home / ".sky" / "ssh_node_pools.yaml"
    if re.search(rf"^{re.escape(target)}:\s*$", _read(cfg), re.M):
        return Reachability(True, f"{cfg} pool {target}")
    return Reachability(False, f"no pool {target!r} in {cfg}")


def reachability_all(clusters: ClustersFile) -> dict[str, Reachability]:
    return {c.name: reachability(c) for c in clusters.clusters}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _ssh_config_hosts(path: Path) -> set[str]:
    hosts: set[str] = set()
    for line in _read(path).splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[0].lower() == "host":
            hosts.update(parts[1:])
    return hosts
