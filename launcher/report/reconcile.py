"""Reconcile the ledger with the cloud bill, per experiment, for one month.

Bill sources, both grouped by the `experiment` tag/label our infra puts on every resource:
- AWS Cost Explorer `get_cost_and_usage` (monthly, UnblendedCost, GroupBy TAG experiment); boto3
  is imported lazily and honours AWS_ENDPOINT_URL (a moto_server in tests).
- A GCP billing export in BigQuery's export schema, from a file: JSON lines (or one JSON array)
  with `cost`, `currency`, `labels` [{key, value}], `credits` [{amount}], `invoice.month`
  (YYYYMM) and `usage_start_time`; or a CSV of those columns with `labels`/`credits` as JSON
  text and `invoice.month` or `invoice_month`. A row's cost is `cost` plus its credits (net).

The ledger side is the compute cost of each experiment's attempts on that cloud in the month
(checkpoint storage is excluded: buckets are tagged per project, not per experiment).
"""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from launcher.errors import BadInputError, CredentialsError, ProviderError
from launcher.report.periods import Window

UNTAGGED = "(untagged)"
TAG_KEY = "experiment"


@dataclass(frozen=True)
class ReconcileRow:
    provider: str  # aws | gcp
    experiment: str
    ledger_usd: float
    bill_usd: float

    @property
    def diff_usd(self) -> float:
        """Bill minus ledger: positive when the cloud charged more than the ledger knows."""
        return self.bill_usd - self.ledger_usd

    @property
    def diff_pct(self) -> float | None:
        base = self.bill_usd if self.bill_usd else self.ledger_usd
        return None if not base else 100.0 * self.diff_usd / base

    def status(self, tolerance_pct: float) -> str:
        if self.bill_usd == 0 and self.ledger_usd > 0:
            return "not in bill"
        if self.ledger_usd == 0 and self.bill_usd > 0:
            return "untagged" if self.experiment == UNTAGGED else "not in ledger"
        pct = self.diff_pct
        return "ok" if abs(self.diff_usd) < 0.005 or (pct is not None and abs(pct) <= tolerance_pct) else "differs"

    def as_dict(self, tolerance_pct: float) -> dict[str, Any]:
        pct = self.diff_pct
        return {
            "provider": self.provider,
            "experiment": self.experiment,
            "ledger_usd": round(self.ledger_usd, 6),
            "bill_usd": round(self.bill_usd, 6),
            "diff_usd": round(self.diff_usd, 6),
            "diff_pct": None if pct is None else round(pct, 3),
            "status": self.status(tolerance_pct),
        }


@dataclass(frozen=True)
class ReconcileResult:
    month: str
    rows: tuple[ReconcileRow, ...]
    tolerance_pct: float

    @property
    def mismatches(self) -> list[ReconcileRow]:
        return [r for r in self.rows if r.status(self.tolerance_pct) != "ok"]

    def as_dicts(self) -> list[dict[str, Any]]:
        return [r.as_dict(self.tolerance_pct) for r in self.rows]


# ---- AWS ------------------------------------------------------------------------------------


def aws_bill_by_tag(
    window: Window, *, tag_key: str = TAG_KEY, metric: str = "UnblendedCost", client: Any = None
) -> dict[str, float]:
    """Cost Explorer cost per tag value over [since, until) (dates; End is exclusive)."""
    assert window.since is not None and window.until is not None
    if client is None:
        try:
            import boto3
        except ImportError as e:  # pragma: no cover - boto3 is in the aws extra
            raise ProviderError("boto3 is not installed", hint="pip install 'gpu-launcher[aws]'") from e
        client = boto3.client("ce", region_name="us-east-1", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    params: dict[str, Any] = {
        "TimePeriod": {"Start": window.since.strftime("%Y-%m-%d"), "End": window.until.strftime("%Y-%m-%d")},
        "Granularity": "MONTHLY",
        "Metrics": [metric],
        "GroupBy": [{"Type": "TAG", "Key": tag_key}],
    }
    totals: dict[str, float] = defaultdict(float)
    prefix = f"{tag_key}$"
    try:
        while True:
            resp = client.get_cost_and_usage(**params)
            for period in resp.get("ResultsByTime", []):
                for group in period.get("Groups", []):
                    key = group["Keys"][0]
                    value = key[len(prefix):] if key.startswith(prefix) else key
                    amount = group["Metrics"][metric]
                    if amount.get("Unit", "USD") != "USD":
                        raise BadInputError(f"Cost Explorer returned {amount.get('Unit')} amounts; only USD is reconciled")
                    totals[value or UNTAGGED] += float(amount["Amount"])
            token = resp.get("NextPageToken")
            if not token:
                break
            params["NextPageToken"] = token
    except NoCredentialsError as e:
        raise CredentialsError("no AWS credentials for Cost Explorer", hint="set AWS_PROFILE or AWS_ACCESS_KEY_ID") from e
    except ClientError as e:
        raise ProviderError(f"Cost Explorer get_cost_and_usage failed: {e}") from e
    except BotoCoreError as e:
        raise ProviderError(f"Cost Explorer is unreachable: {e}") from e
    return dict(totals)


# ---- GCP billing export -----------------------------------------------------------------------


def _labels(value: Any) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {str(item["key"]): str(item["value"]) for item in value}


def _credits(value: Any) -> float:
    if value in (None, ""):
        return 0.0
    if isinstance(value, str):
        value = json.loads(value)
    return sum(float(c.get("amount", 0.0)) for c in value)


def _read_rows(path: Path) -> Iterable[dict[str, Any]]:
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f)
        return
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from json.loads(stripped)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInputError(f"{path}:{n}: not a JSON object ({e.msg})") from e


def _invoice_month(row: Mapping[str, Any]) -> str | None:
    inv = row.get("invoice")
    if isinstance(inv, Mapping) and inv.get("month"):
        return str(inv["month"])
    for k in ("invoice.month", "invoice_month"):
        if row.get(k):
            return str(row[k])
    return None


def gcp_bill_by_label(path: Path, window: Window, *, label_key: str = TAG_KEY) -> dict[str, float]:
    """Net cost per label value of the export rows billed in the window's month."""
    assert window.since is not None and window.until is not None
    if not path.is_file():
        raise BadInputError(f"GCP billing export {path} does not exist", hint="pass a JSON-lines or CSV export file")
    month = window.since.strftime("%Y%m")
    totals: dict[str, float] = defaultdict(float)
    try:
        for n, row in enumerate(_read_rows(path), 1):
            inv = _invoice_month(row)
            if inv is not None:
                if inv != month:
                    continue
            else:
                start = row.get("usage_start_time")
                if not start:
                    raise BadInputError(f"{path}: row {n} has neither invoice.month nor usage_start_time")
                t = datetime.fromisoformat(str(start).replace(" UTC", "+00:00").replace("Z", "+00:00"))
                if not (window.since <= t < window.until):
                    continue
            currency = row.get("currency") or "USD"
            if currency != "USD":
                raise BadInputError(f"{path}: row {n} is in {currency}; only USD exports are reconciled")
            cost = float(row.get("cost") or 0.0) + _credits(row.get("credits"))
            value = _labels(row.get("labels")).get(label_key) or UNTAGGED
            totals[value] += cost
    except (KeyError, TypeError, ValueError) as e:
        raise BadInputError(f"{path} is not a BigQuery billing export ({type(e).__name__}: {e})") from e
    return dict(totals)


# ---- compare ----------------------------------------------------------------------------------


def compare(provider: str, ledger: Mapping[str, float], bill: Mapping[str, float]) -> list[ReconcileRow]:
    keys = sorted(set(ledger) | set(bill))
    rows = [ReconcileRow(provider, k, float(ledger.get(k, 0.0)), float(bill.get(k, 0.0))) for k in keys]
    return sorted(rows, key=lambda r: (-abs(r.diff_usd), r.experiment))


def ledger_by_cloud_experiment(ledger: Any, window: Window, *, now: datetime | None = None) -> dict[str, dict[str, float]]:
    from launcher.report.build import ReportQuery, build_report

    frame = build_report(ledger, ReportQuery(by=("cloud", "experiment"), window=window), now=now).frame
    from launcher.report.focus import PROVIDER_NAMES

    names = {v: k for k, v in PROVIDER_NAMES.items()}
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for prov, exp, cost in zip(frame["ProviderName"], frame["x_ExperimentId"], frame["x_ComputeCost"]):
        exp = UNTAGGED if exp == "(none)" else exp
        cloud = names.get(prov, prov)
        out[cloud][exp] = out[cloud].get(exp, 0.0) + float(cost)
    return out


def reconcile(
    ledger: Any,
    window: Window,
    month: str,
    *,
    aws: bool = False,
    gcp_export: Path | None = None,
    tolerance_pct: float = 1.0,
    ce_client: Any = None,
    now: datetime | None = None,
) -> ReconcileResult:
    if not aws and gcp_export is None:
        raise BadInputError("nothing to reconcile against", hint="pass --aws and/or --gcp-export FILE")
    if gcp_export is not None and not gcp_export.is_file():
        raise BadInputError(f"GCP billing export {gcp_export} does not exist")
    gcp_bill = gcp_bill_by_label(gcp_export, window) if gcp_export is not None else None
    aws_bill = aws_bill_by_tag(window, client=ce_client) if aws else None
    ours = ledger_by_cloud_experiment(ledger, window, now=now)
    rows: list[ReconcileRow] = []
    if aws_bill is not None:
        rows += compare("aws", ours.get("aws", {}), aws_bill)
    if gcp_bill is not None:
        rows += compare("gcp", ours.get("gcp", {}), gcp_bill)
    return ReconcileResult(month=month, rows=tuple(rows), tolerance_pct=tolerance_pct)
