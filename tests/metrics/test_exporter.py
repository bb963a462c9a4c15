"""The ledger's Prometheus metrics against hand-computed values, and spend against
`launcher report` (the real CLI) for the same instant."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from launcher.ledger import Ledger, NewAttempt, ReapAuditRecord, RunRecord, RunState
from launcher.metrics.exporter import EXPORTED, ledger_metrics
from tests.conftest import run_cli

T = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the scrape instant


def _run(led: Ledger, run_id: str, project: str, experiment: str) -> None:
    led.create_run(RunRecord(run_id=run_id, name=experiment, spec_hash="h", spec_yaml="run: x", project=project,
                             experiment=experiment, created_at=T - timedelta(hours=3)))  # fmt: skip


def _attempt(led, run_id, *, cloud, region, gpu, gpus, nodes, spot, price, start, hours, end_reason):
    a = led.add_attempt(run_id, NewAttempt(cloud=cloud, region=region, instance_type="x", price_usd_per_hour=price,
                                           accelerator=gpu, accelerator_count=gpus, num_nodes=nodes, spot=spot),
                        started_at=start)  # fmt: skip
    if end_reason is not None:
        led.end_attempt(a.attempt_id, end_reason, ended_at=start + timedelta(hours=hours))


@pytest.fixture
def ledger_with_history(launcher_home):
    (launcher_home / "budgets.yaml").write_text("budgets:\n  - project: vision\n    monthly_limit_usd: 100\n")
    cat = launcher_home / "catalogs" / "aws"
    cat.mkdir(parents=True)
    (cat / "vms.csv").write_text("InstanceType\n")
    os.utime(cat / "vms.csv", (time.time() - 7200, time.time() - 7200))
    with Ledger() as led:
        _run(led, "r-1", "vision", "resnet")
        _run(led, "r-2", "nlp", "bert")
        _run(led, "r-3", "vision", "vit")
        t0 = T - timedelta(hours=2)
        # vision/resnet on aws: 2 nodes x $0.5/h, 1 h preempted then 0.5 h completed
        _attempt(led, "r-1", cloud="aws", region="us-east-1", gpu="T4", gpus=1, nodes=2, spot=True, price=0.5, start=t0, hours=1, end_reason="preempted")
        _attempt(led, "r-1", cloud="aws", region="us-east-1", gpu="T4", gpus=1, nodes=2, spot=True, price=0.5, start=t0 + timedelta(hours=1), hours=0.5, end_reason="completed")
        # nlp/bert on gcp: 8 x A100 on demand at $10/h for 15 min
        _attempt(led, "r-2", cloud="gcp", region="us-central1", gpu="A100", gpus=8, nodes=1, spot=False, price=10.0, start=t0, hours=0.25, end_reason="completed")
        # vision/vit: open since 30 min before the scrape, spot $2/h
        _attempt(led, "r-3", cloud="aws", region="us-west-2", gpu="T4", gpus=1, nodes=1, spot=True, price=2.0, start=T - timedelta(minutes=30), hours=0, end_reason=None)
        for r in ("r-1", "r-2"):
            led.set_run_state(r, RunState.SUCCEEDED)
        led.set_run_state("r-3", RunState.RUNNING)
        for saving, dry, decision in ((1.25, False, "act"), (0.75, False, "act"), (9.0, True, "act"), (5.0, False, "keep")):
            led.record_reap(ReapAuditRecord(provider="aws", region="us-east-1", instance_id=f"i-{saving}", decision=decision,
                                            action="destroy", estimated_saving_usd=saving, dry_run=dry, at=t0))  # fmt: skip
        led.add_event("r-3", "lease_adopted", {"owner": "b", "from": "a", "generation": 2}, at=t0)
        yield led


def scrape(led) -> dict[str, list]:
    from launcher.metrics.exporter import LedgerCollector
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry(auto_describe=False)
    reg.register(LedgerCollector(led, now=lambda: T))
    text = generate_latest(reg).decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples, **labels) -> float:
    hits = [v for lab, v in samples if all(lab.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (labels, samples)
    return hits[0]


def test_metrics_equal_hand_computed_values(ledger_with_history) -> None:
    s = scrape(ledger_with_history)
    spend = s["launcher_spend_dollars_total"]
    assert value(spend, project="vision", experiment="resnet") == pytest.approx(0.5 * 2 * 1 + 0.5 * 2 * 0.5)
    assert value(spend, project="nlp", experiment="bert") == pytest.approx(10 * 0.25)
    assert value(spend, project="vision", experiment="vit") == pytest.approx(2.0 * 0.5)
    assert value(s["launcher_preemptions_total"], cloud="aws", region="us-east-1") == 1
    assert value(s["launcher_gpu_hours_total"], project="vision", gpu="T4") == pytest.approx(2 * 1 + 2 * 0.5 + 0.5)
    assert value(s["launcher_gpu_hours_total"], project="nlp", gpu="A100") == pytest.approx(8 * 0.25)
    assert s["launcher_run_price_dollars_per_hour"] == [({"project": "vision", "cloud": "aws", "region": "us-west-2", "spot": "true"}, 2.0)]
    assert value(s["launcher_attempt_duration_seconds_count"]) == 3
    assert value(s["launcher_attempt_duration_seconds_sum"]) == pytest.approx(3600 + 1800 + 900)
    assert value(s["launcher_attempt_duration_seconds_bucket"], le="900.0") == 1
    assert value(s["launcher_attempt_duration_seconds_bucket"], le="1800.0") == 2
    assert value(s["launcher_attempt_duration_seconds_bucket"], le="+Inf") == 3
    assert value(s["launcher_reaper_terminated_total"], cloud="aws") == 2
    assert value(s["launcher_reaper_saved_dollars_total"], cloud="aws") == pytest.approx(2.0)
    assert value(s["launcher_lease_adoptions_total"]) == 1
    assert value(s["launcher_runs"], state="succeeded", project="vision") == 1
    assert value(s["launcher_runs"], state="running", project="vision") == 1
    # the month's vision spend is 1.5 + the open attempt up to the budget check's clock (>= 1.0)
    remaining = value(s["launcher_budget_remaining_dollars"], project="vision")
    assert remaining <= 100 - 1.5 - 1.0 + 1e-6
    assert value(s["launcher_catalog_age_seconds"], cloud="aws") == pytest.approx(7200, abs=120)


def test_every_listed_metric_is_exported(ledger_with_history) -> None:
    text = ledger_metrics(ledger_with_history)().decode()
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    server_only = {"launcher_server_leases_held", "launcher_server_tick_seconds"}
    assert set(EXPORTED) - server_only <= helped | {n.removesuffix("_total") for n in helped} | {n + "_total" for n in helped}


def test_spend_equals_launcher_report_for_the_same_instant(ledger_with_history) -> None:
    s = scrape(ledger_with_history)
    r = run_cli("report", "--by", "project,experiment,cloud", "--json", "--as-of", T.isoformat(), "--no-cache")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    report = {(x["x_ProjectId"], x["x_ExperimentId"], x["ProviderName"]): x["BilledCost"] for x in rows}
    metrics = {(lab["project"], lab["experiment"], lab["cloud"]): v for lab, v in s["launcher_spend_dollars_total"]}
    assert metrics.keys() == report.keys() and len(report) == 3
    for k in report:
        assert metrics[k] == pytest.approx(report[k], abs=1e-6)
