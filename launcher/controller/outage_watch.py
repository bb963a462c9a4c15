"""The outages a run saw in its spot zones, as ledger events (`outage`) that later runs learn from
(`placement_history`): attempts tell them how long capacity lasted, these how long it stayed away.

A zone seen without capacity (the provider said so, a launch was refused, a probe failed) is down
from the first such sighting; seen with capacity again, that outage ended after the time between
the first sighting and this one (resolution: how often the zone was looked at, at most the probes'
back-off). When the run ends, an outage still open is written unended, lasting to when the zone was
last seen down: a long outage the run outlasted is the evidence a later run most needs. Only known
sightings count; a controller killed mid-run loses its open outages, nothing else.
"""

from __future__ import annotations

from pricing.models import Offer

OUTAGE_EVENT = "outage"


def _key(o: Offer) -> tuple:
    return (o.cloud, o.region, o.zone, o.instance_type)


class OutageWatch:
    def __init__(self) -> None:
        self._open: dict[tuple, tuple[Offer, float, float]] = {}  # key -> (offer, first seen down, last seen down)
        self._done: list[dict] = []

    def observe(self, offer: Offer, up: bool, now_s: float) -> None:
        k = _key(offer)
        if up:
            if k in self._open:
                o, since, _ = self._open.pop(k)
                self._done.append(_event(o, now_s - since, ended=True))
        else:
            o, since, _ = self._open.get(k, (offer, now_s, now_s))
            self._open[k] = (o, since, now_s)

    def take(self) -> list[dict]:
        """Outages ended since the last call (event data, oldest first)."""
        out, self._done = self._done, []
        return out

    def close(self) -> list[dict]:
        """`take`, then every outage still open, unended (seen down for some time, else dropped)."""
        out = self.take()
        out += [_event(o, last - since, ended=False) for o, since, last in self._open.values() if last > since]
        self._open.clear()
        return out


def _event(o: Offer, seconds: float, *, ended: bool) -> dict:
    return {"cloud": o.cloud, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
            "down_hours": round(max(0.0, seconds) / 3600.0, 6), "ended": ended}  # fmt: skip
