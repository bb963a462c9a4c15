"""Reconciliation against a real moto_server Cost Explorer (results seeded through moto's API)
and GCP billing export files in BigQuery's export schema."""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path

import pytest

from launcher.errors import BadInputError
from launcher.report.periods import month_window
from launcher.report.reconcile import UNTAGGED, gcp_bill_by_label, reconcile

from .conftest import NOW

NOV = month_window("2026-11")


def seed_cost_explorer(endpoint: str, results: list[dict]) -> None:
    """Seed Cost Explorer in the account the current credentials belong to (each test has its own)."""
    import boto3

    account = boto3.client("sts").get_caller_identity()["Account"]
    req = urllib.request.Request(
        f"{endpoint}/moto-api/static/ce/cost-and-usage-results",
        data=json.dumps({"results": results, "account_id": account}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 201


def _group(key: str, amount: str) -> dict:
    return {"Keys": [key], "Metrics": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}}


def _period(groups: list[dict]) -> dict:
    return {"TimePeriod": {"Start": "2026-11-01", "End": "2026-12-01"}, "Total": {}, "Groups": groups, "Estimated": True}


@pytest.fixture
def aws_bill(aws_env):
    # two pages: moto answers the first request with the first result and the request that
    # carries NextPageToken (a different body) with the second
    seed_cost_explorer(
        aws_env,
        [
            {"ResultsByTime": [_period([_group("experiment$exp-a", "10.50"), _group("experiment$exp-c", "2.00")])],
             "NextPageToken": "page-2", "DimensionValueAttributes": []},
            {"ResultsByTime": [_period([_group("experiment$", "3.25"), _group("experiment$exp-z", "1.00")])],
             "DimensionValueAttributes": []},
        ],
    )  # fmt: skip
    return aws_env


GCP_ROWS = [
    {"billing_account_id": "01AB", "service": {"id": "6F81", "description": "Compute Engine"},
     "sku": {"id": "A100", "description": "Nvidia Tesla A100 GPU running in Americas"},
     "usage_start_time": "2026-11-03T00:00:00+00:00", "usage_end_time": "2026-11-03T01:00:00+00:00",
     "labels": [{"key": "experiment", "value": "exp-b"}, {"key": "project", "value": "nlp"}],
     "location": {"region": "us-central1"}, "cost": 8.10, "currency": "USD",
     "credits": [{"name": "Sustained use", "amount": -0.10, "type": "SUSTAINED_USAGE_DISCOUNT"}],
     "invoice": {"month": "202611"}, "cost_type": "regular"},
    {"labels": [{"key": "experiment", "value": "exp-b"}], "cost": 5.0, "currency": "USD",
     "usage_start_time": "2026-10-30T00:00:00+00:00", "invoice": {"month": "202610"}, "credits": []},
    {"labels": [], "cost": 1.5, "currency": "USD", "usage_start_time": "2026-11-04T00:00:00+00:00",
     "invoice": {"month": "202611"}, "credits": []},
    {"labels": [{"key": "experiment", "value": "exp-q"}], "cost": 2.0, "currency": "USD",
     "usage_start_time": "2026-11-05T00:00:00+00:00", "invoice": {"month": "202611"}, "credits": []},
]  # fmt: skip


@pytest.fixture
def gcp_jsonl(tmp_path) -> Path:
    path = tmp_path / "gcp-billing.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in GCP_ROWS))
    return path


def test_gcp_export_jsonl_and_csv_agree(gcp_jsonl, tmp_path):
    bill = gcp_bill_by_label(gcp_jsonl, NOV)
    # 8.10 - 0.10 credit; the October row is left out
    assert bill == pytest.approx({"exp-b": 8.0, UNTAGGED: 1.5, "exp-q": 2.0})
    csv_path = tmp_path / "gcp-billing.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["usage_start_time", "cost", "currency", "labels", "credits", "invoice_month"])
        w.writeheader()
        for r in GCP_ROWS:
            w.writerow({"usage_start_time": r["usage_start_time"], "cost": r["cost"], "currency": r["currency"],
                        "labels": json.dumps(r["labels"]), "credits": json.dumps(r["credits"]),
                        "invoice_month": r["invoice"]["month"]})  # fmt: skip
    assert gcp_bill_by_label(csv_path, NOV) == pytest.approx(bill)


def test_reconcile_aws_and_gcp(hand_ledger, aws_bill, gcp_jsonl):
    result = reconcile(hand_ledger, NOV, "2026-11", aws=True, gcp_export=gcp_jsonl, now=NOW)
    rows = {(r["provider"], r["experiment"]): r for r in result.as_dicts()}
    a = rows[("aws", "exp-a")]
    assert (a["ledger_usd"], a["bill_usd"]) == pytest.approx((10.0, 10.5))
    assert a["diff_usd"] == pytest.approx(0.5)
    assert a["diff_pct"] == pytest.approx(100 * 0.5 / 10.5, abs=1e-3)
    assert a["status"] == "differs"
    assert rows[("aws", "exp-c")]["status"] == "ok"  # open attempt up to the clock: $2.00
    assert rows[("aws", UNTAGGED)]["bill_usd"] == pytest.approx(3.25)  # from the second page
    assert rows[("aws", UNTAGGED)]["status"] == "untagged"
    assert rows[("aws", "exp-z")]["status"] == "not in ledger"
    assert rows[("gcp", "exp-b")]["status"] == "ok"
    assert rows[("gcp", "exp-q")]["status"] == "not in ledger"
    assert ("aws", "exp-b") not in rows  # exp-b ran on GCP only
    assert {r.experiment for r in result.mismatches} == {"exp-a", UNTAGGED, "exp-z", "exp-q"}


def test_reconcile_bad_input(hand_ledger, tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        reconcile(hand_ledger, NOV, "2026-11", gcp_export=tmp_path / "missing.jsonl", now=NOW)
    with pytest.raises(BadInputError, match="nothing to reconcile"):
        reconcile(hand_ledger, NOV, "2026-11", now=NOW)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cost": 1, "invoice": {"month": "202611"}}\nnot json\n')
    with pytest.raises(BadInputError, match=r"bad.jsonl:2"):
        gcp_bill_by_label(bad, NOV)
