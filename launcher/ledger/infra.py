"""Ledger methods for infrastructure records: clusters, heartbeats, the reaper's audit log."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update

from launcher.errors import BadInputError, NotFoundError
from launcher.ledger import models as m
from launcher.ledger.base import LedgerBase, _as_set
from launcher.ledger.records import ClusterRecord, ClusterState, ReapAuditRecord
from launcher.ledger.rows import cluster_from_row, jsonable, reap_from_row, upsert, write_tags


class InfraRecords(LedgerBase):
    # ---- clusters -----------------------------------------------------------------------------
    def upsert_cluster(self, cluster: ClusterRecord) -> ClusterRecord:
        """Insert or update by name (tags merged). created_at is kept from the first insert;
        entering state 'terminated' sets terminated_at (cluster.terminated_at, else now)."""
        k = m.clusters.c
        now = self._now()
        values: dict[str, Any] = {
            "provider": cluster.provider, "region": cluster.region, "zone": cluster.zone,
            "stack": cluster.stack, "state": str(cluster.state), "run_id": cluster.run_id,
            "project": cluster.project, "nodes": jsonable(list(cluster.nodes)), "updated_at": now,
        }  # fmt: skip
        with self._tx() as c:
            old = c.execute(select(k.terminated_at).where(k.name == cluster.name).with_for_update()).first()
            if cluster.state == ClusterState.TERMINATED:
                values["terminated_at"] = (old.terminated_at if old else None) or cluster.terminated_at or now
            else:
                values["terminated_at"] = None
            if old is None:
                c.execute(insert(m.clusters).values(name=cluster.name, created_at=cluster.created_at or now, **values))
            else:
                c.execute(update(m.clusters).where(k.name == cluster.name).values(values))
            write_tags(c, "cluster", cluster.name, cluster.tags)
        return self.get_cluster(cluster.name)

    def set_cluster_state(self, name: str, state: str) -> ClusterRecord:
        return self.upsert_cluster(replace(self.get_cluster(name), state=state, tags={}))

    def get_cluster(self, name: str) -> ClusterRecord:
        """Raises NotFoundError."""
        with self._read() as c:
            row = c.execute(select(m.clusters).where(m.clusters.c.name == name)).first()
            if row is None:
                raise NotFoundError(f"no cluster {name!r} in the ledger")
            return cluster_from_row(row, self._tags(c, "cluster", [name]).get(name))

    def clusters(
        self,
        *,
        state: str | Collection[str] | None = None,
        provider: str | None = None,
        run_id: str | None = None,
    ) -> list[ClusterRecord]:
        """Oldest first."""
        k = m.clusters.c
        q = select(m.clusters).order_by(k.created_at, k.name)
        if state is not None:
            q = q.where(k.state.in_(_as_set(state)))
        if provider is not None:
            q = q.where(k.provider == provider)
        if run_id is not None:
            q = q.where(k.run_id == run_id)
        with self._read() as c:
            rows = c.execute(q).all()
            tags = self._tags(c, "cluster", [r.name for r in rows])
        return [cluster_from_row(r, tags.get(r.name)) for r in rows]

    # ---- heartbeats ---------------------------------------------------------------------------
    def heartbeat(self, *, run_id: str | None = None, cluster: str | None = None, at: datetime | None = None) -> None:
        """Record that the run and/or cluster is alive now (keeps only the latest beat)."""
        subjects = [("run", run_id), ("cluster", cluster)]
        rows = [{"subject_type": t, "subject_id": i, "at": at or self._now()} for t, i in subjects if i]
        if not rows:
            raise BadInputError("heartbeat needs a run_id or a cluster")
        with self._tx() as c:
            upsert(c, m.heartbeats, rows, keys=("subject_type", "subject_id"), update=("at",))

    def last_heartbeat(self, *, run_id: str | None = None, cluster: str | None = None) -> datetime | None:
        """Exactly one of run_id / cluster."""
        if (run_id is None) == (cluster is None):
            raise BadInputError("last_heartbeat needs exactly one of run_id / cluster")
        h = m.heartbeats.c
        subject = ("run", run_id) if run_id is not None else ("cluster", cluster)
        with self._read() as c:
            return c.execute(select(h.at).where(h.subject_type == subject[0], h.subject_id == subject[1])).scalar()

    # ---- reaper audit -------------------------------------------------------------------------
    def record_reap(self, entry: ReapAuditRecord) -> ReapAuditRecord:
        """Append one audit row (at = now unless given); returns it with id and at set."""
        at = entry.at or self._now()
        values = self._reap_values(entry, at)
        with self._tx() as c:
            new_id = c.execute(insert(m.reap_audit).values(values)).inserted_primary_key[0]
        return replace(entry, id=new_id, at=at, reasons=values["reasons"])

    def record_reap_many(self, entries: Sequence[ReapAuditRecord]) -> int:
        """Append many audit rows in one transaction (one fsync): for the rows of a pass that
        record no action (keep/skip). Returns how many were written."""
        if not entries:
            return 0
        now = self._now()
        rows = [self._reap_values(e, e.at or now) for e in entries]
        with self._tx() as c:
            c.execute(insert(m.reap_audit), rows)
        return len(rows)

    @staticmethod
    def _reap_values(entry: ReapAuditRecord, at: datetime) -> dict:
        return {
            "at": at, "pass_id": entry.pass_id, "provider": entry.provider, "region": entry.region,
            "instance_id": entry.instance_id, "cluster": entry.cluster, "project": entry.project,
            "decision": entry.decision, "action": entry.action,
            "reasons": jsonable(list(entry.reasons)), "hourly_price_usd": entry.hourly_price_usd,
            "estimated_saving_usd": entry.estimated_saving_usd, "ok": entry.ok,
            "error": entry.error, "dry_run": entry.dry_run,
        }  # fmt: skip

    def reap_audit(
        self,
        *,
        since: datetime | None = None,
        instance_id: str | None = None,
        provider: str | None = None,
        pass_id: str | None = None,
        limit: int | None = None,
    ) -> list[ReapAuditRecord]:
        """Oldest first (with `limit`: the newest `limit` rows, still oldest first)."""
        t = m.reap_audit.c
        q = select(m.reap_audit).order_by(t.id.desc())
        for col, val in ((t.instance_id, instance_id), (t.provider, provider), (t.pass_id, pass_id)):
            if val is not None:
                q = q.where(col == val)
        if since is not None:
            q = q.where(t.at >= since)
        if limit is not None:
            q = q.limit(limit)
        with self._read() as c:
            rows = c.execute(q).all()
        return [reap_from_row(r) for r in reversed(rows)]
