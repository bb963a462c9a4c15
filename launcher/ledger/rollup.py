"""The cost rollup: per ended run, its cost by UTC calendar month, cloud and region
(`cost_rollup`), so a grouped report over a large ledger sums rows in the database instead of
reading every attempt. Months, not days: a run's checkpoints are kept a week after it ends, so
daily rows would be ten per run, more rows than attempts; monthly ones are about one.

The attempt figures come from launcher.cost.attempts' rules (billed interval, price history,
restart overhead, preemption loss, idle), the same rule text the reports run on numpy, here on
one attempt at a time in plain Python (the controller writes a run's rows when it ends, and must
import neither pandas nor numpy for that), split at UTC month starts; checkpoint storage with
keep_last 3 and 7 days' retention. The report tests compare the rollup with the vectorized path.

Rows are written for a run once it has ended and all its attempts have ended, in the same
transaction (Ledger.set_run_state, end_attempt, and events that change an ended run's costs:
teardown, checkpoint, recovery, price); a run re-opened loses them. `cost_rollup_runs` marks
the runs whose rows are written: a report reads every other run attempt by attempt.

`run_count_bits` says on which of the run's rows it counts once for x_Runs, for each way a
report can split a run (bit 1: by cloud, 2: by region, 4: by month; bit 0 set on one row
when it is not split): a report sums the bit instead of counting distinct runs.

Each run also has one GRAIN_RUN row, its other rows summed, for reports grouped by run-level
keys only (experiment, project, owner, cost center, run, without months): half the rows to sum.

Storage is kept as GB-hours (a report with its own prices applies them per cloud) and as USD at
the list prices (launcher.cost.storage; the GRAIN_RUN row has no cloud). keep_last and the retention
are fixed here: a report with other values reads the attempts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, insert, select

from launcher.ledger import models as m
from launcher.ledger.records import PREEMPTED_REASONS
from launcher.cost.attempts import one_attempt, one_bucket
from launcher.cost.storage import CHECKPOINT_KEEP_LAST, CHECKPOINT_RETENTION_AFTER_RUN_S, default_storage_usd
from launcher.cost.window import Window, month_spans_s

# The rollup bills checkpoint storage under CostAssumptions' defaults; a report with others reads the runs.
ROLLUP_KEEP_LAST, ROLLUP_RETENTION_S = CHECKPOINT_KEEP_LAST, CHECKPOINT_RETENTION_AFTER_RUN_S
RUN_KEY_COLUMNS = ("project", "experiment", "owner", "cost_center")
GRAIN_SPLIT = 0  # a row per UTC month, cloud and region
GRAIN_RUN = 1  # one row per run: what a report by run-level keys alone sums (half the rows)
COUNTS = ("preemptions", "attempts_started", "attempt_segments")
SUMS = (
    "compute_usd", "list_compute_usd", "node_hours", "gpu_hours", "restart_overhead_usd",
    "preemption_loss_usd", "idle_usd", "storage_gb_hours", "preemptions", "attempts_started",
    "attempt_segments",
)  # fmt: skip


@dataclass(frozen=True)
class AttemptCostInput:
    """One ended attempt, times as epoch seconds (None where unknown)."""

    attempt_id: str
    seq: int
    cloud: str | None
    region: str | None
    num_nodes: float
    accelerator_count: float
    price_usd_per_hour: float
    on_demand_price_usd_per_hour: float | None
    started_at: float
    ended_at: float
    billed_seconds: float | None
    preempted: bool
    teardown_at: float | None = None
    last_ckpt_at: float | None = None
    resume_at: float | None = None
    overhead_s: float | None = None
    prices: tuple[tuple[float, float], ...] = ()  # (at, price_usd_per_hour) ordered by at


@dataclass(frozen=True)
class CheckpointInput:
    """One checkpoint event of the run (ordered by at, id; unsized ones too: they count for
    keep_last), with its attempt's cloud and region."""

    at: float
    size_bytes: float | None
    cloud: str | None
    region: str | None


@dataclass
class _Cell:
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SUMS, 0.0))
    seg_start_s: float = math.inf
    seg_end_s: float = -math.inf
    compute_end_s: float | None = None


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(min(a1, b1) - max(a0, b0), 0.0)


def attempt_segments(a: AttemptCostInput) -> list[tuple[float, dict[str, float], float, float]]:
    """(month start, measures, seg start, seg end) of each UTC month the attempt's billed
    interval overlaps (launcher.cost.attempts' rules, one attempt at a time)."""
    one = one_attempt(a)
    start, bill_end = one.start, one.bill_end
    out = []
    for i, (b0, b1) in enumerate(month_spans_s(start, bill_end)):
        cost, m = one_bucket(one, b0, b1, a.accelerator_count)
        measures = {
            "compute_usd": cost,
            "list_compute_usd": m.list_compute_usd,
            "node_hours": m.node_hours,
            "gpu_hours": m.gpu_hours,
            "restart_overhead_usd": m.restart_overhead_usd,
            "preemption_loss_usd": m.preemption_loss_usd,
            "idle_usd": m.idle_usd,
            "preemptions": 1.0 if m.preempted else 0.0,
            "attempts_started": 1.0 if i == 0 else 0.0,
            "attempt_segments": 1.0,
        }
        out.append((b0, measures, max(start, b0), min(bill_end, b1)))
    return out


def storage_segments(
    checkpoints: Sequence[CheckpointInput], run_ended_at: float
) -> list[tuple[float, str | None, str | None, float, float, float]]:
    """(month start, cloud, region, GB-hours, seg start, seg end) of the run's checkpoint storage:
    each sized checkpoint from its time until the run's keep_last-th next one, the newest until
    the retention after the run's end (attempt_cost's rules, at the fixed ROLLUP_* values)."""
    out = []
    k = ROLLUP_KEEP_LAST
    for i, ck in enumerate(checkpoints):
        if not ck.size_bytes or ck.size_bytes <= 0:
            continue
        end = run_ended_at + ROLLUP_RETENTION_S
        if i + k < len(checkpoints):
            end = min(checkpoints[i + k].at, end)
        end = max(end, ck.at)
        if end <= ck.at:
            continue
        gb = ck.size_bytes / 1e9
        for b0, b1 in month_spans_s(ck.at, end):
            gb_hours = gb * _overlap(ck.at, end, b0, b1) / 3600.0
            out.append((b0, ck.cloud, ck.region, gb_hours, max(ck.at, b0), min(end, b1)))
    return out


def run_rollup_rows(
    run_id: str,
    run_keys: Mapping[str, Any],
    run_ended_at: float,
    attempts: Iterable[AttemptCostInput],
    checkpoints: Sequence[CheckpointInput],
) -> tuple[list[dict[str, Any]], float | None, float | None]:
    """The run's cost_rollup rows (one per UTC month, cloud and region) and their extent."""
    cells: dict[tuple[float, str | None, str | None], _Cell] = {}
    for a in attempts:
        for month, measures, s0, s1 in attempt_segments(a):
            cell = cells.setdefault((month, a.cloud, a.region), _Cell())
            for name, v in measures.items():
                cell.sums[name] += v
            cell.seg_start_s, cell.seg_end_s = min(cell.seg_start_s, s0), max(cell.seg_end_s, s1)
            cell.compute_end_s = s1 if cell.compute_end_s is None else max(cell.compute_end_s, s1)
    for month, cloud, region, gb_hours, s0, s1 in storage_segments(checkpoints, run_ended_at):
        cell = cells.setdefault((month, cloud, region), _Cell())
        cell.sums["storage_gb_hours"] += gb_hours
        cell.seg_start_s, cell.seg_end_s = min(cell.seg_start_s, s0), max(cell.seg_end_s, s1)
    if not cells:
        return [], None, None
    first = min(c.seg_start_s for c in cells.values())
    last = max(c.seg_end_s for c in cells.values())
    rows = []
    seen: set[tuple[int, Any, Any, Any]] = set()
    for (month, cloud, region), cell in sorted(cells.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), str(kv[0][2]))):
        bits = 0
        if cell.sums["attempt_segments"] > 0:  # the run counts once per group (x_Runs) without DISTINCT
            for bit in range(8):
                key = (bit, cloud if bit & 1 else None, region if bit & 2 else None, month if bit & 4 else None)
                if key not in seen:
                    seen.add(key)
                    bits |= 1 << bit
        row: dict[str, Any] = {
            "run_id": run_id, "month_start_s": month,
            "cloud": cloud, "region": region, "run_first_s": first, "run_last_s": last,
            "seg_start_s": cell.seg_start_s, "seg_end_s": cell.seg_end_s, "compute_end_s": cell.compute_end_s,
            "run_count_bits": bits, "grain": GRAIN_SPLIT,
        }  # fmt: skip
        row.update({k: run_keys.get(k) for k in RUN_KEY_COLUMNS})
        for name in SUMS:
            v = cell.sums[name]
            row[name] = int(round(v)) if name in COUNTS else v
        row["storage_usd"] = default_storage_usd(cloud, cell.sums["storage_gb_hours"])
        rows.append(row)
    return [*rows, _whole_run(rows)], first, last


def _whole_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's GRAIN_RUN row: its GRAIN_SPLIT rows summed (no month, cloud or region)."""
    row = {**rows[0], "grain": GRAIN_RUN, "cloud": None, "region": None, "month_start_s": min(r["month_start_s"] for r in rows)}
    for name in (*SUMS, "storage_usd"):
        row[name] = sum(r[name] for r in rows)
    row["seg_start_s"] = min(r["seg_start_s"] for r in rows)
    row["seg_end_s"] = max(r["seg_end_s"] for r in rows)
    ends = [r["compute_end_s"] for r in rows if r["compute_end_s"] is not None]
    row["compute_end_s"] = max(ends) if ends else None
    row["run_count_bits"] = 1 if row["attempt_segments"] > 0 else 0
    return row


# ---- reading a run and writing its rows ---------------------------------------------------------


def _epoch(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def write_rollup(conn: Any, run_ids: Iterable[str]) -> None:
    """(Re)write these runs' rollup rows from the ledger, inside the caller's transaction: rows
    and marker for a run that has ended with all its attempts ended, none otherwise."""
    r, a, f, e = m.runs.c, m.attempts.c, m.attempt_facts.c, m.events.c
    for run_id in dict.fromkeys(run_ids):
        conn.execute(delete(m.cost_rollup).where(m.cost_rollup.c.run_id == run_id))
        conn.execute(delete(m.cost_rollup_runs).where(m.cost_rollup_runs.c.run_id == run_id))
        run = conn.execute(select(r.ended_at, *[getattr(r, k) for k in RUN_KEY_COLUMNS]).where(r.run_id == run_id)).first()
        if run is None or run.ended_at is None:
            continue
        rows = conn.execute(
            select(
                a.attempt_id, a.seq, a.cloud, a.region, a.num_nodes, a.accelerator_count, a.price_usd_per_hour,
                a.on_demand_price_usd_per_hour, a.started_at, a.ended_at, a.billed_seconds, a.end_reason,
                f.teardown_at, f.last_ckpt_at, f.resume_at, f.overhead_s,
            )  # fmt: skip
            .select_from(m.attempts.outerjoin(m.attempt_facts, f.attempt_id == a.attempt_id))
            .where(a.run_id == run_id)
        ).all()
        if any(row.ended_at is None for row in rows):
            continue
        # `kind || ''` keeps SQLite on the (run_id, id) index instead of every event of a kind
        events = conn.execute(
            select(e.attempt_id, e.kind, e.at, e.data)
            .where(e.run_id == run_id, e.kind.concat("").in_(("price", "checkpoint")))
            .order_by(e.at, e.id)
        ).all()
        prices: dict[str, list[tuple[float, float]]] = {}
        for ev in events:
            if ev.kind == "price" and ev.attempt_id is not None:
                p = _float(_field(ev.data, "price_usd_per_hour"))
                if p is not None:
                    prices.setdefault(ev.attempt_id, []).append((ev.at.timestamp(), p))
        where = {row.attempt_id: (row.cloud, row.region) for row in rows}
        checkpoints = [
            CheckpointInput(ev.at.timestamp(), _float(_field(ev.data, "size_bytes")), *where.get(ev.attempt_id, (None, None)))
            for ev in events
            if ev.kind == "checkpoint"
        ]
        attempts = [
            AttemptCostInput(
                attempt_id=row.attempt_id, seq=row.seq, cloud=row.cloud, region=row.region,
                num_nodes=float(row.num_nodes), accelerator_count=float(row.accelerator_count),
                price_usd_per_hour=row.price_usd_per_hour, on_demand_price_usd_per_hour=row.on_demand_price_usd_per_hour,
                started_at=row.started_at.timestamp(), ended_at=row.ended_at.timestamp(), billed_seconds=row.billed_seconds,
                preempted=row.end_reason in PREEMPTED_REASONS, teardown_at=_epoch(row.teardown_at),
                last_ckpt_at=_epoch(row.last_ckpt_at), resume_at=_epoch(row.resume_at), overhead_s=row.overhead_s,
                prices=tuple(prices.get(row.attempt_id, ())),
            )  # fmt: skip
            for row in rows
        ]
        keys = {k: getattr(run, k) for k in RUN_KEY_COLUMNS}
        insert_run_rows(conn, run_id, *run_rollup_rows(run_id, keys, run.ended_at.timestamp(), attempts, checkpoints))


def insert_run_rows(conn: Any, run_id: str, rows: list[dict[str, Any]], first: float | None, last: float | None) -> None:
    if rows:
        conn.execute(insert(m.cost_rollup), rows)
    conn.execute(insert(m.cost_rollup_runs).values(run_id=run_id, first_s=first, last_s=last))


def _field(data: Any, key: str) -> Any:
    return data.get(key) if isinstance(data, dict) else None


def _float(v: Any) -> float | None:
    try:
        out = float(v)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def rewrite_if_ended(conn: Any, run_id: str) -> None:
    """A run's costs changed (an attempt ended, a late event): rewrite its rows if it has ended."""
    r = m.runs.c
    if conn.execute(select(r.ended_at).where(r.run_id == run_id)).scalar() is not None:
        write_rollup(conn, [run_id])


def backfill(conn: Any) -> int:
    """Write the rows of every ended run that has none yet (after the upgrade that adds the
    tables, and for ledgers written in bulk). Bulk reads, the same per-run arithmetic.
    Returns how many runs were rolled up."""
    import numpy as np

    from launcher.ledger.readers import _Select, read_attempts

    r, a, e = m.runs.c, m.attempts.c, m.events.c
    marked = m.cost_rollup_runs.c
    todo = select(r.run_id).where(r.ended_at.is_not(None), ~exists().where(marked.run_id == r.run_id))
    q = _Select(conn, True)
    q.text("run_id", r.run_id)
    q.time("ended_at", r.ended_at)
    for k in RUN_KEY_COLUMNS:
        q.text(k, getattr(r, k))
    runs = q.frame(conn, q.statement().where(r.run_id.in_(todo)))
    if runs.empty:
        return 0
    att = read_attempts(conn, Window(), ("region",), False, with_ids=True, where=a.run_id.in_(todo), bulk=True)
    q = _Select(conn, True)
    for c in ("run_id", "attempt_id", "kind"):
        q.text(c, getattr(e, c))
    q.time("at", e.at)
    q.num("id", e.id)
    q.num("size_bytes", e.data["size_bytes"].as_float())
    q.num("price", e.data["price_usd_per_hour"].as_float())
    ev = q.frame(conn, q.statement().where(e.kind.in_(("checkpoint", "price")), e.run_id.in_(todo)))
    ev = ev.iloc[np.lexsort((ev["id"].to_numpy(), ev["at"].to_numpy()))] if len(ev) else ev

    def opt(v: float) -> float | None:
        return None if v != v else float(v)  # NaN -> None

    prices: dict[str, list[tuple[float, float]]] = {}
    checkpoints: dict[str, list[tuple[float, float | None, str | None]]] = {}
    for run_id, attempt_id, kind, at, size, price in zip(
        *(ev[c].astype(object).tolist() for c in ("run_id", "attempt_id", "kind")),
        ev["at"].tolist(), ev["size_bytes"].tolist(), ev["price"].tolist(),
    ):  # fmt: skip
        if kind == "price":
            if attempt_id is not None and price == price:
                prices.setdefault(attempt_id, []).append((at, price))
        else:
            checkpoints.setdefault(run_id, []).append((at, opt(size), attempt_id))

    by_run: dict[str, list[AttemptCostInput]] = {}
    open_runs: set[str] = set()
    cols = ("attempt_id", "run_id", "seq", "cloud", "region", "num_nodes", "accelerator_count", "price_usd_per_hour",
            "on_demand_price_usd_per_hour", "started_at", "ended_at", "billed_seconds", "preempted", "teardown_at",
            "last_ckpt_at", "resume_at", "overhead_s")  # fmt: skip
    values = [att[c].astype(object).tolist() if att[c].dtype == "category" else att[c].tolist() for c in cols]
    where: dict[str, tuple[str | None, str | None]] = {}
    for (aid, run_id, seq, cloud, region, nodes, gpus, price, od, start, end, billed, pre, td, lc, ra, ov) in zip(*values):
        if end != end:
            open_runs.add(run_id)
            continue
        where[aid] = (cloud, region)
        by_run.setdefault(run_id, []).append(
            AttemptCostInput(
                aid, int(seq), cloud, region, float(nodes), float(gpus), float(price), opt(od), float(start), float(end),
                opt(billed), bool(pre), opt(td), opt(lc), opt(ra), opt(ov), tuple(prices.get(aid, ())),  # events are in (at, id) order
            )
        )
    n = 0
    batch: list[dict[str, Any]] = []
    markers: list[dict[str, Any]] = []
    run_cols = [runs[c].astype(object).tolist() for c in ("run_id", "ended_at", *RUN_KEY_COLUMNS)]
    for run_id, ended_at, *keys in zip(*run_cols):
        if run_id in open_runs:
            continue
        cks = [CheckpointInput(at, size, *where.get(aid, (None, None))) for at, size, aid in checkpoints.get(run_id, ())]
        rows, first, last = run_rollup_rows(run_id, dict(zip(RUN_KEY_COLUMNS, keys)), float(ended_at), by_run.get(run_id, ()), cks)
        batch.extend(rows)
        markers.append({"run_id": run_id, "first_s": first, "last_s": last})
        n += 1
        if len(batch) >= 20_000:
            conn.execute(insert(m.cost_rollup), batch)
            batch = []
    if batch:
        conn.execute(insert(m.cost_rollup), batch)
    for i in range(0, len(markers), 20_000):
        conn.execute(insert(m.cost_rollup_runs), markers[i : i + 20_000])
    return n
