"""Per-attempt cost facts: what a cost report needs from an ended attempt's events, kept in
`attempt_facts` (one row per ended attempt) so a report reads one row per attempt instead of
scanning every event.

A row holds the attempt's last `teardown` and `checkpoint` times, its first `recovery` time and
that event's restart_overhead_seconds, and how many `price` events it has. The ledger writes it
in the transaction that ends the attempt, and rewrites it when an event of those kinds arrives
for an ended attempt (a teardown recorded after the end, a late checkpoint). Open attempts
have no row: readers compute their facts from the events (there are few open attempts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import case, delete, func, insert, literal, select

from launcher.ledger import models as m

FACT_EVENT_KINDS = ("teardown", "checkpoint", "recovery", "price")


def facts_select(attempt_ids: Sequence[str] | None = None) -> Any:
    """SELECT of attempt_facts rows for ended attempts (those in `attempt_ids`, or all)."""
    e, a = m.events.c, m.attempts.c
    q = (
        select(
            e.attempt_id,
            func.max(case((e.kind == "teardown", e.at))),
            func.max(case((e.kind == "checkpoint", e.at))),
            func.min(case((e.kind == "recovery", e.at))),
            func.max(case((e.kind == "recovery", e.data["restart_overhead_seconds"].as_float()))),
            func.count(case((e.kind == "price", 1))),
        )
        .select_from(m.events.join(m.attempts, a.attempt_id == e.attempt_id))
        .where(e.kind.in_(FACT_EVENT_KINDS), a.ended_at.is_not(None))
        .group_by(e.attempt_id)
    )
    if attempt_ids is not None:
        q = q.where(e.attempt_id.in_(list(attempt_ids)))
    return q


FACT_COLUMNS = ("attempt_id", "teardown_at", "last_ckpt_at", "resume_at", "overhead_s", "n_price")


def write_facts(conn: Any, attempt_ids: Sequence[str] | None = None) -> None:
    """(Re)write the facts of these ended attempts (or of every ended attempt) from their events.
    Ended attempts without such events get a row of NULLs, so 'no row' always means 'open'."""
    f, a = m.attempt_facts, m.attempts.c
    if attempt_ids is not None:
        conn.execute(delete(f).where(f.c.attempt_id.in_(list(attempt_ids))))
    else:
        conn.execute(delete(f))
    conn.execute(insert(f).from_select(list(FACT_COLUMNS), facts_select(attempt_ids)))
    bare = select(a.attempt_id, literal(0)).where(
        a.ended_at.is_not(None), a.attempt_id.not_in(select(f.c.attempt_id))
    )
    if attempt_ids is not None:
        bare = bare.where(a.attempt_id.in_(list(attempt_ids)))
    conn.execute(insert(f).from_select(["attempt_id", "n_price"], bare))
