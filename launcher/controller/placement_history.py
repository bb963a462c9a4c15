"""What earlier runs saw of each zone's spot capacity, from the ledger, for a new run's placement policy.

A spot attempt that ran h hours and ended by a preemption is an up spell of h hours seen ending; one
that ended otherwise (completed, moved, cancelled) is h hours of an up spell still running when we
left. An `outage` event (controller/outage_watch.py) is a down spell a run saw, ended (capacity came
back) or not (the run ended first). Summed per zone (cloud, region, zone, instance type), that is the
evidence the spell estimators learn from within a run, so a run starts from what the team's last
week of runs saw instead of from the prior alone: a zone whose capacity kept getting reclaimed after
minutes is not where `multi-zone` hops first, and a zone whose outages lasted a day is not one to
wait for. Capped at `MAX_SEED_SPELLS` spells' worth a side (`ZoneHistory.capped`), since capacity
changes and the run's own spells must soon outweigh history. The local backend's capacity is
simulated per run (a trace, time-compressed), so it has no history.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from launcher.controller.outage_watch import OUTAGE_EVENT
from launcher.ledger.interfaces import LedgerReader
from launcher.ledger.records import AttemptRecord, EndReason, EventRecord
from launcher.policies.zone_history import MAX_SEED_SPELLS, ZoneHistory
from pricing.models import Offer

HISTORY_DAYS = 7.0
MAX_SEED_HOURS = 24.0 * HISTORY_DAYS


# A refused provision held nothing; an attempt closed by crash cleanup ended when it was found.
_NOT_EVIDENCE = (EndReason.PROVISION_FAILED, EndReason.ABANDONED)


def _key(cloud: str, region: str, zone: str | None, instance_type: str) -> tuple:
    return (cloud, region, zone, instance_type)


def _hours(x: object) -> bool:
    """A length of time as an event holds it: a finite number >= 0 (anything else is not evidence)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def zone_history(attempts: Iterable[AttemptRecord], offers: Sequence[Offer], *, exclude_run: str,
                 outages: Iterable[EventRecord] = ()) -> dict[Offer, ZoneHistory]:  # fmt: skip
    """Per spot offer of the plan, what other runs' ended spot attempts and `outage` events there
    saw, capped (offers without any: left out)."""
    wanted = {_key(o.cloud, o.region, o.zone, o.instance_type): o for o in offers if o.spot and o.cloud != "local"}
    seen: dict[tuple, list] = {}  # key -> [up hours, preemptions, down hours, recoveries]
    for a in attempts:
        k = _key(a.cloud, a.region, a.zone, a.instance_type)
        if k not in wanted or a.run_id == exclude_run or a.ended_at is None or a.end_reason in _NOT_EVIDENCE:
            continue
        s = seen.setdefault(k, [0.0, 0, 0.0, 0])
        s[0] += max(0.0, (a.ended_at - a.started_at).total_seconds() / 3600.0)
        s[1] += a.end_reason == EndReason.PREEMPTED
    for e in outages:
        d = e.data
        k = _key(d.get("cloud"), d.get("region"), d.get("zone"), d.get("instance_type"))
        hours = d.get("down_hours")
        if k not in wanted or e.run_id == exclude_run or not _hours(hours):
            continue
        s = seen.setdefault(k, [0.0, 0, 0.0, 0])
        s[2] += float(hours)
        s[3] += d.get("ended") is True
    return {wanted[k]: ZoneHistory(*s).capped(MAX_SEED_SPELLS, MAX_SEED_HOURS) for k, s in seen.items()}


def read_history(led: LedgerReader, spot: Sequence[Offer], *, run_id: str, days: float) -> tuple[dict[Offer, ZoneHistory], dict | None]:
    """The history of the last `days` (0: none) for `spot` offers, and the event that records it."""
    if days <= 0:
        return {}, None
    since = datetime.now(UTC) - timedelta(days=days)
    history = zone_history(led.ended_spot_attempts(since=since), spot, exclude_run=run_id,
                           outages=led.recent_events(OUTAGE_EVENT, since=since))  # fmt: skip
    if not history:
        return history, None
    return history, {"days": days, "zones": [
        {"cloud": o.cloud, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
         "up_hours": round(h.up_hours, 4), "preemptions": h.preemptions,
         "down_hours": round(h.down_hours, 4), "recoveries": h.recoveries}
        for o, h in history.items()]}  # fmt: skip
