"""Ledger methods for money: spend (what attempts cost, by launcher.ledger.attempt_cost, the
one definition shared with reports) and the burn rate of open attempts."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, and_, func, select, true

from launcher.cost.window import Window
from launcher.ledger import models as m
from launcher.ledger.base import LedgerBase


def _all_free(conn: Connection, where: ColumnElement[bool]) -> bool:
    """True when every matching attempt is priced $0/h and none has a price change: its cost is
    then 0 by any counting, so the cost model (and pandas, 0.3-0.5 s to import) is not needed.
    The local backend's runs are free."""
    a, e = m.attempts.c, m.events.c
    matching = select(a.attempt_id).select_from(m.attempts.join(m.runs)).where(where)
    priced = matching.where(a.price_usd_per_hour.is_(None) | (a.price_usd_per_hour != 0.0)).limit(1)
    if conn.execute(priced).first() is not None:
        return False
    changes = select(e.attempt_id).where(e.kind == "price", e.attempt_id.in_(matching)).limit(1)
    return conn.execute(changes).first() is None


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
        """Compute cost of the matching attempts inside [since, until), as reports count it
        (launcher.ledger.attempt_cost: billed time to teardown, price changes, open attempts up
        to the ledger's clock; an attempt straddling a bound counts for its part inside)."""
        a, r = m.attempts.c, m.runs.c
        conds = [col == val for col, val in ((r.project, project), (r.owner, owner), (a.run_id, run_id)) if val is not None]
        now = self._now()
        with self._read() as c:
            if _all_free(c, and_(true(), *conds)):
                return 0.0
            from launcher.ledger.attempt_cost import compute_cost_in_window
            from launcher.ledger.readers import read_attempts, read_prices

            attempts = read_attempts(c, Window(since, until), (), False, with_ids=True, where=and_(true(), *conds))
            prices = read_prices(c, attempt_ids=attempts["attempt_id"].tolist()) if len(attempts) else None
        return compute_cost_in_window(attempts, prices, now.timestamp(), Window(since, until))

    def attempt_costs_usd(self, run_id: str, *, now: datetime | None = None) -> dict[str, float]:
        """Each attempt of a run: its whole cost so far, as spend_usd and reports count it
        (open attempts up to `now`, default the ledger's clock)."""
        with self._read() as c:
            if _all_free(c, m.attempts.c.run_id == run_id):
                ids = select(m.attempts.c.attempt_id).where(m.attempts.c.run_id == run_id).order_by(m.attempts.c.seq)
                return {aid: 0.0 for aid in c.execute(ids).scalars()}
            from launcher.ledger.attempt_cost import attempt_costs
            from launcher.ledger.readers import read_attempts, read_prices

            attempts = read_attempts(c, Window(), (), False, with_ids=True, where=m.attempts.c.run_id == run_id)
            prices = read_prices(c, attempt_ids=attempts["attempt_id"].tolist()) if len(attempts) else None
        return attempt_costs(attempts, prices, (now or self._now()).timestamp())

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
