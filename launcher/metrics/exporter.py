"""Prometheus metrics read from the ledger at scrape time (prometheus_client custom collector).

Every figure is computed from the ledger when Prometheus scrapes, so replicas (or a single
`launcher metrics serve`) export the same values and nothing is lost when one restarts. Spend is
the cost report's figure (report.build.build_report, BilledCost over all time, by project,
experiment and cloud), so it equals `launcher report` for the same window.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from sqlalchemy import func, select

from launcher.ledger import models as m

PREEMPTED = ("preempted", "node_lost")
ATTEMPT_DURATION_BUCKETS_S = (60.0, 300.0, 900.0, 1800.0, 3600.0, 3 * 3600.0, 6 * 3600.0, 12 * 3600.0, 24 * 3600.0, 72 * 3600.0)

# name (as exposed) -> type; the dashboard test checks its queries against this list
EXPORTED = {
    "launcher_runs": "gauge",
    "launcher_run_price_dollars_per_hour": "gauge",
    "launcher_spend_dollars_total": "counter",
    "launcher_budget_remaining_dollars": "gauge",
    "launcher_preemptions_total": "counter",
    "launcher_gpu_hours_total": "counter",
    "launcher_attempt_duration_seconds": "histogram",
    "launcher_reaper_terminated_total": "counter",
    "launcher_reaper_saved_dollars_total": "counter",
    "launcher_lease_adoptions_total": "counter",
    "launcher_catalog_age_seconds": "gauge",
    "launcher_server_leases_held": "gauge",
    "launcher_server_tick_seconds": "gauge",
}


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name.removesuffix("_total"), doc, labels=labels)


class LedgerCollector:
    def __init__(self, ledger: Any, *, replica: Any = None, now: Callable[[], datetime] | None = None) -> None:
        self.led = ledger
        self.replica = replica
        self.now = now or (lambda: datetime.now(UTC))

    def collect(self) -> Iterator[Metric]:
        now = self.now()
        yield from self._runs()
        yield from self._attempts(now)
        yield self._spend(now)
        yield self._budgets(now)
        yield from self._reaper()
        yield self._adoptions()
        yield self._catalog_age()
        if self.replica is not None:
            g = GaugeMetricFamily("launcher_server_leases_held", "Runs this replica drives.", labels=["owner"])
            g.add_metric([self.replica.owner_id], len(self.replica.running()))
            yield g
            ticks = self.replica.stats.tick_seconds
            t = GaugeMetricFamily("launcher_server_tick_seconds", "Duration of this replica's last lease tick.", labels=["owner"])
            t.add_metric([self.replica.owner_id], ticks[-1] if ticks else 0.0)
            yield t

    # ---- groups --------------------------------------------------------------------------------
    def _runs(self) -> Iterator[Metric]:
        r = m.runs.c
        g = GaugeMetricFamily("launcher_runs", "Runs in the ledger by state.", labels=["state", "project"])
        with self.led.engine.connect() as c:
            for state, project, n in c.execute(select(r.state, r.project, func.count()).group_by(r.state, r.project)):
                g.add_metric([state, project], n)
        yield g

    def _attempts(self, now: datetime) -> Iterator[Metric]:
        a, r = m.attempts.c, m.runs.c
        q = select(
            r.project, a.cloud, a.region, a.spot, a.accelerator, a.accelerator_count, a.num_nodes,
            a.price_usd_per_hour, a.started_at, a.ended_at, a.end_reason, a.billed_seconds,
        ).join(m.runs, m.runs.c.run_id == a.run_id)  # fmt: skip
        price: dict[tuple, float] = defaultdict(float)
        preempt: dict[tuple, int] = defaultdict(int)
        gpu_h: dict[tuple, float] = defaultdict(float)
        durations: list[float] = []
        with self.led.engine.connect() as c:
            rows = c.execute(q).all()
        for row in rows:
            start = _utc(row.started_at)
            end = _utc(row.ended_at) if row.ended_at is not None else None
            seconds = row.billed_seconds if row.billed_seconds is not None else max(0.0, ((end or now) - start).total_seconds())
            if end is None:
                price[(row.project, row.cloud, row.region, "true" if row.spot else "false")] += row.price_usd_per_hour * row.num_nodes
            else:
                durations.append(seconds)
            if row.end_reason in PREEMPTED:
                preempt[(row.cloud, row.region)] += 1
            if row.accelerator and row.accelerator_count:
                gpu_h[(row.project, row.accelerator)] += seconds / 3600.0 * row.accelerator_count * row.num_nodes
        g = GaugeMetricFamily(
            "launcher_run_price_dollars_per_hour", "Hourly price of the machines open attempts hold.", labels=["project", "cloud", "region", "spot"]
        )
        for k, v in sorted(price.items()):
            g.add_metric(list(k), v)
        yield g
        p = _counter("launcher_preemptions_total", "Attempts ended by a preemption or lost node.", ["cloud", "region"])
        for k, v in sorted(preempt.items()):
            p.add_metric(list(k), v)
        yield p
        h = _counter("launcher_gpu_hours_total", "GPU hours billed (GPUs x nodes x hours).", ["project", "gpu"])
        for k, v in sorted(gpu_h.items()):
            h.add_metric(list(k), v)
        yield h
        buckets, acc = [], 0
        for bound in ATTEMPT_DURATION_BUCKETS_S:
            acc = sum(1 for d in durations if d <= bound)
            buckets.append((_fmt(bound), acc))
        buckets.append(("+Inf", len(durations)))
        yield HistogramMetricFamily(
            "launcher_attempt_duration_seconds", "Billed duration of ended attempts.", buckets=buckets, sum_value=sum(durations)
        )

    def _spend(self, now: datetime) -> Metric:
        from launcher.report.build import ReportQuery
        from launcher.report.rollup_report import build_grouped_report

        c = _counter("launcher_spend_dollars_total", "Billed cost, as `launcher report` counts it.", ["project", "experiment", "cloud"])
        result = build_grouped_report(self.led, ReportQuery(by=("project", "experiment", "cloud")), now=now)
        frame = result.frame
        if len(frame):
            for _, row in frame.iterrows():
                c.add_metric([str(row["x_ProjectId"]), str(row["x_ExperimentId"]), str(row["ProviderName"])], float(row["BilledCost"]))
        return c

    def _budgets(self, now: datetime) -> Metric:
        g = GaugeMetricFamily("launcher_budget_remaining_dollars", "What is left of each monthly project budget.", labels=["project", "budget"])
        from launcher.planning.budget import budget_status

        try:
            for s in budget_status(self.led, now):
                if s.remaining_usd is not None:
                    g.add_metric([s.project, s.budget], s.remaining_usd)
        except Exception:  # a broken budgets.yaml must not break every other metric
            pass
        return g

    def _reaper(self) -> Iterator[Metric]:
        k = m.reap_audit.c
        q = (
            select(k.provider, func.count(), func.coalesce(func.sum(k.estimated_saving_usd), 0.0))
            .where(k.decision == "act", k.ok.is_(True), k.dry_run.is_(False))
            .group_by(k.provider)
        )
        terminated = _counter("launcher_reaper_terminated_total", "Instances the reaper stopped or removed.", ["cloud"])
        saved = _counter("launcher_reaper_saved_dollars_total", "The reaper's estimated savings.", ["cloud"])
        with self.led.engine.connect() as c:
            for provider, n, usd in c.execute(q):
                terminated.add_metric([provider], n)
                saved.add_metric([provider], float(usd))
        yield terminated
        yield saved

    def _adoptions(self) -> Metric:
        from launcher.ledger.leases import LEASE_ADOPTED_EVENT

        e = m.events.c
        with self.led.engine.connect() as c:
            n = c.execute(select(func.count()).where(e.kind == LEASE_ADOPTED_EVENT)).scalar() or 0
        a = _counter("launcher_lease_adoptions_total", "Runs a server replica adopted after their owner's lease expired.", [])
        a.add_metric([], n)
        return a

    def _catalog_age(self) -> Metric:
        from launcher import paths

        g = GaugeMetricFamily("launcher_catalog_age_seconds", "Age of the cached price catalog per cloud.", labels=["cloud"])
        root = paths.catalog_cache_dir()
        if root.is_dir():
            for d in sorted(p for p in root.iterdir() if p.is_dir()):
                f = d / "vms.csv"
                if f.is_file():
                    g.add_metric([d.name], max(0.0, time.time() - os.stat(f).st_mtime))
        return g


def _utc(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _fmt(x: float) -> str:
    return repr(float(x))


def ledger_registry(ledger: Any, *, replica: Any = None) -> CollectorRegistry:
    """A registry whose one collector reads the ledger at each scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(ledger, replica=replica))
    return registry


def ledger_metrics(ledger: Any, *, replica: Any = None) -> Callable[[], bytes]:
    """A function that renders the metrics (Prometheus text format) from the ledger."""
    registry = ledger_registry(ledger, replica=replica)
    return lambda: generate_latest(registry)
