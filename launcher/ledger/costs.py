"""Ledger methods for money: spend, burn rate, the report frame and database-side roll-ups."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, or_, select

from launcher.ledger import models as m
from launcher.ledger.base import LedgerBase
from launcher.ledger.records import AttemptsFrame, CostRollupRow
from launcher.ledger.rollup import rollup_select
from launcher.ledger.spend import attempt_cost_in_window
from launcher.ledger.types import epoch


class CostQueries(LedgerBase):
    # ---- spend --------------------------------------------------------------------------------
    def spend_usd(
        self,
        *,
        project: str | None = None,
        owner: str | None = None,
        run_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> float:
        """Cost of attempts within [since, until): billed hours x hourly price x nodes, open
        attempts counted up to now; an attempt straddling a bound counts pro rata."""
        a, r = m.attempts.c, m.runs.c
        q = select(a.started_at, a.ended_at, a.billed_seconds, a.price_usd_per_hour, a.num_nodes)
        q = self._window(q.select_from(m.attempts.join(m.runs)), since, until)
        for col, val in ((r.project, project), (r.owner, owner), (a.run_id, run_id)):
            if val is not None:
                q = q.where(col == val)
        now = self._now()
        with self._read() as c:
            rows = c.execute(q).all()
        return sum(attempt_cost_in_window(*row, now=now, since=since, until=until) for row in rows)

    def project_spend_usd(self, project: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(project=project, since=since, until=until)

    def owner_spend_usd(self, owner: str, since: datetime | None = None, until: datetime | None = None) -> float:
        return self.spend_usd(owner=owner, since=since, until=until)

    def run_spend_usd(self, run_id: str) -> float:
        return self.spend_usd(run_id=run_id)

    def burn_rate_usd_per_hour(self, *, project: str | None = None, owner: str | None = None) -> float:
        """Sum of hourly prices (x nodes) of the open attempts (for hourly burn limits)."""
        a, r = m.attempts.c, m.runs.c
        q = select(func.coalesce(func.sum(a.price_usd_per_hour * a.num_nodes), 0.0))
        q = q.select_from(m.attempts.join(m.runs)).where(a.ended_at.is_(None))
        if project is not None:
            q = q.where(r.project == project)
        if owner is not None:
            q = q.where(r.owner == owner)
        with self._read() as c:
            return float(c.execute(q).scalar() or 0.0)

    @staticmethod
    def _window(q: Select[Any], since: datetime | None, until: datetime | None) -> Select[Any]:
        """Attempts whose [started_at, ended_at or open) overlaps [since, until)."""
        a = m.attempts.c
        if until is not None:
            q = q.where(a.started_at < until)
        if since is not None:
            q = q.where(or_(a.ended_at.is_(None), a.ended_at >= since))
        return q

    # ---- reports ------------------------------------------------------------------------------
    def attempts_frame(self, since: datetime | None = None, until: datetime | None = None) -> AttemptsFrame:
        """Attempts overlapping [since, until) joined with run fields and tags, column-wise.

        Build a DataFrame with `pandas.DataFrame(frame.columns)`. See AttemptsFrame. Rows are
        in no particular order. Reads every row: for grouped totals over millions of attempts
        use cost_rollup (the database aggregates).
        """
        a, r = m.attempts.c, m.runs.c
        cols = [
            a.attempt_id, a.run_id, a.seq, a.cloud, a.region, a.zone, a.instance_type,
            a.accelerator, a.accelerator_count, a.num_nodes, a.spot, a.price_usd_per_hour,
            a.on_demand_price_usd_per_hour, a.cluster, a.state,
            epoch(a.started_at).label("started_at"), epoch(a.ended_at).label("ended_at"),
            a.end_reason, a.exit_code, a.billed_seconds, r.name.label("run_name"), r.project,
            r.experiment, r.owner, r.cost_center, r.state.label("run_state"),
        ]  # fmt: skip
        q = self._window(select(*cols).select_from(m.attempts.join(m.runs)), since, until)
        run_ids = self._window(select(a.run_id).distinct(), since, until)
        t = m.tags.c
        tq = select(t.entity_id, t.key, t.value).where(t.entity_type == "run", t.entity_id.in_(run_ids))
        as_of = self._now()
        with self._read() as c:
            rows = c.execute(q).all()
            tag_rows = c.execute(tq).all()
        names = [col.key if col.key else col.name for col in q.selected_columns]
        columns: dict[str, list[Any]] = {n: [] for n in names}
        if rows:
            for n, values in zip(names, zip(*rows, strict=True), strict=True):
                columns[n] = list(values)
        columns["spot"] = [bool(v) for v in columns["spot"]]
        tags: dict[str, dict[str, str]] = {}
        for run_id, key, value in tag_rows:
            tags.setdefault(run_id, {})[key] = value
        empty: dict[str, str] = {}
        columns["tags"] = [tags.get(rid, empty) for rid in columns["run_id"]]
        return AttemptsFrame(columns=columns, as_of=as_of)

    def cost_rollup(
        self,
        by: Sequence[str],
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[CostRollupRow]:
        """Cost per group, computed by the database (fast on millions of attempts).

        `by`: any of project, experiment, owner, cost_center, run_id, cloud, region, zone,
        instance_type, accelerator, spot, cluster, day, month, or "tag:KEY" (a run tag).
        Same cost rule as spend_usd (pro rata to [since, until), open attempts up to now);
        day/month are the UTC day/month the attempt started. Sorted by the keys.
        UnknownNameError (bad input) for an unknown key.
        """
        now = self._now()
        q, names = rollup_select(by, now=now, since=since, until=until)
        with self._read() as c:
            rows = c.execute(q).all()
        n = len(names)
        out = []
        for row in rows:
            keys = dict(zip(names, row[:n], strict=True))
            if "spot" in keys and keys["spot"] is not None:
                keys["spot"] = bool(keys["spot"])
            (attempts, preempt, node_h, gpu_h, billed, listed, spot, first, last) = row[n:]
            out.append(
                CostRollupRow(
                    keys=keys, attempts=int(attempts), preemptions=int(preempt or 0),
                    node_hours=float(node_h or 0.0), gpu_hours=float(gpu_h or 0.0),
                    billed_cost_usd=float(billed or 0.0), list_cost_usd=float(listed or 0.0),
                    spot_cost_usd=float(spot or 0.0),
                    first_start=first, last_end=last,
                )  # fmt: skip
            )
        return out

    def run_tags(self, run_ids: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        t = m.tags.c
        q = select(t.entity_id, t.key, t.value).where(t.entity_type == "run")
        if run_ids is not None:
            q = q.where(t.entity_id.in_(list(run_ids)))
        out: dict[str, dict[str, str]] = {}
        with self._read() as c:
            for run_id, key, value in c.execute(q):
                out.setdefault(run_id, {})[key] = value
        return out
