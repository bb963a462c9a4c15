"""Cost roll-ups computed by the database (GROUP BY), for reports over millions of attempts.

Cost of one attempt = billed hours x price per node x nodes, where billed hours are
billed_seconds (or the elapsed time up to `now` while open), pro rata to the part of the attempt
inside [since, until). Day/month group an attempt under the UTC day/month it started.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Select, and_, case, func, literal, or_, select
from sqlalchemy.sql.expression import ColumnElement

from launcher.errors import BadInputError
from launcher.ledger import models as m
from launcher.ledger.types import UtcDateTime, epoch, greatest, least, utc_prefix

RUN_KEYS = ("project", "experiment", "owner", "cost_center", "run_id")
ATTEMPT_KEYS = ("cloud", "region", "zone", "instance_type", "accelerator", "spot", "cluster")
TIME_KEYS = ("day", "month")
GROUP_KEYS = (*RUN_KEYS, *ATTEMPT_KEYS, *TIME_KEYS)  # plus "tag:<key>"
PREEMPTED_REASONS = ("preempted", "node_lost")


def _num(x: float) -> ColumnElement[float]:
    return literal(x, Float())


def rollup_select(
    by: Sequence[str], *, now: datetime, since: datetime | None, until: datetime | None
) -> tuple[Select[Any], list[str]]:
    """The GROUP BY statement and the names of its key columns (in `by` order)."""
    if not by:
        raise BadInputError("a roll-up needs at least one grouping key", hint=f"one of {', '.join(GROUP_KEYS)}")
    a, r = m.attempts, m.runs
    source: Any = a.join(r, r.c.run_id == a.c.run_id)
    keys: list[ColumnElement[Any]] = []
    names: list[str] = []
    for i, key in enumerate(by):
        if key.startswith("tag:") and len(key) > 4:
            t = m.tags.alias(f"tag{i}")
            source = source.outerjoin(
                t, and_(t.c.entity_type == "run", t.c.entity_id == r.c.run_id, t.c.key == key[4:])
            )
            col: ColumnElement[Any] = t.c.value
        elif key in RUN_KEYS:
            col = r.c[key] if key != "run_id" else a.c.run_id
        elif key in ATTEMPT_KEYS:
            col = a.c[key]
        elif key in TIME_KEYS:
            col = utc_prefix(a.c.started_at, key)
        else:
            from launcher.errors import UnknownNameError

            raise UnknownNameError("grouping key", key, [*GROUP_KEYS, "tag:KEY"])
        keys.append(col.label(f"k{i}"))
        names.append(key)

    # SQLite evaluates every expression per row and does not share sub-expressions, so the
    # costly text->epoch conversions sit behind CASEs that cheap column tests usually settle:
    # closed attempts carry billed_seconds; only attempts straddling a bound need pro rata.
    now_p = literal(now, UtcDateTime())
    s = epoch(a.c.started_at)
    e = func.coalesce(epoch(a.c.ended_at), _num(now.timestamp()))
    elapsed = e - s
    billed = case(
        (a.c.billed_seconds.is_not(None), a.c.billed_seconds), else_=greatest(elapsed, _num(0.0))
    )
    if since is None and until is None:
        frac: ColumnElement[float] = _num(1.0)
    else:
        inside = [a.c.ended_at.is_not(None)]
        if since is not None:
            inside.append(a.c.started_at >= literal(since, UtcDateTime()))
        if until is not None:
            inside.append(a.c.ended_at <= literal(until, UtcDateTime()))
        lo = greatest(s, _num(since.timestamp())) if since is not None else s
        hi = least(e, _num(until.timestamp())) if until is not None else e
        frac = case(
            (and_(*inside), _num(1.0)),
            (elapsed <= 0, _num(1.0)),
            else_=greatest(_num(0.0), hi - lo) / elapsed,
        )
    node_hours = billed * a.c.num_nodes / 3600.0 if since is None and until is None else billed * frac * a.c.num_nodes / 3600.0
    list_price = func.coalesce(a.c.on_demand_price_usd_per_hour, a.c.price_usd_per_hour)
    q = (
        select(
            *keys,
            func.count().label("attempts"),
            func.sum(case((a.c.end_reason.in_(PREEMPTED_REASONS), 1), else_=0)).label("preemptions"),
            func.sum(node_hours).label("node_hours"),
            func.sum(node_hours * a.c.accelerator_count).label("gpu_hours"),
            func.sum(node_hours * a.c.price_usd_per_hour).label("billed_cost_usd"),
            func.sum(node_hours * list_price).label("list_cost_usd"),
            func.sum(case((a.c.spot, node_hours * a.c.price_usd_per_hour), else_=0.0)).label("spot_cost_usd"),
            func.min(a.c.started_at).label("first_start"),
            func.max(func.coalesce(a.c.ended_at, now_p), type_=UtcDateTime()).label("last_end"),
        )
        .select_from(source)
        .group_by(*keys)
        .order_by(*keys)
    )
    if until is not None:
        q = q.where(a.c.started_at < until)
    if since is not None:
        q = q.where(or_(a.c.ended_at.is_(None), a.c.ended_at >= since))
    return q, names
