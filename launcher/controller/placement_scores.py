"""The clouds' spot placement scores for a plan's spot offers, asked when a controller starts.

They only order the placement policy's zones (`PlacementDriver`), so a cloud that cannot answer (no
permission, no such API on an emulator, no credentials) costs the ordering, never the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from launcher.providers.base import SpotPlacementScores
from pricing.models import Offer


def ask_scores(spot: Sequence[Offer], num_nodes: int, provider_for: Callable[[str], object]) -> tuple[dict[Offer, int], list[dict]]:
    """Scores per offer from the clouds that report them, and the events to record: what was said,
    and per cloud that failed, why (its error, shortened)."""
    scores: dict[Offer, int] = {}
    events: list[dict] = []
    for cloud in sorted({o.cloud for o in spot}):
        try:
            provider = provider_for(cloud)
            if not isinstance(provider, SpotPlacementScores):
                continue
            scores.update(provider.spot_placement_scores([o for o in spot if o.cloud == cloud], num_nodes))
        except Exception as e:  # noqa: BLE001 - an ordering hint must not stop the run
            events.append({"cloud": cloud, "error": str(e)[:300]})
    if scores:
        events.insert(0, {"scores": [
            {"cloud": o.cloud, "region": o.region, "zone": o.zone, "instance_type": o.instance_type, "score": v}
            for o, v in scores.items()]})  # fmt: skip
    return scores, events
