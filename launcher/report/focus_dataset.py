"""A FOCUS 1.2 cost-and-usage dataset: one row per charge.

Charges:
- compute: one row per attempt and calendar month it billed in (machine time, priced as
  launcher/ledger/attempt_cost.py says: price history, teardown, open attempts up to the report's clock);
- checkpoint storage: one row per run, cloud and month (the estimate launcher/ledger/attempt_cost.py describes).

Each row carries every column FOCUS 1.2 makes mandatory, plus the recommended ones we can fill
(ChargeFrequency, ServiceSubcategory; InvoiceId null: we issue no invoices) and our own
dimensions and measures as `x_` columns. BillingPeriod is the calendar month (UTC) of the
charge; a charge never crosses a month boundary. The billing account is, in this order: the
one the caller names for the cloud (`--account`), the cloud account recorded with the attempt
when it was provisioned (AWS account from STS, GCP project; storage rows take the one of their
run's attempts in that cloud), else a stable id derived from the ledger (the local backend,
attempts recorded before the ledger kept accounts).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from launcher.report import focus as F
from launcher.report.build import LedgerData, ReportQuery, ReportResult, report_from_data
from launcher.cost.storage import HOURS_PER_MONTH

# per cloud: (ServiceName of machines, ServiceName of object storage)
SERVICE_NAMES: Mapping[str, tuple[str, str]] = {
    "aws": ("Amazon Elastic Compute Cloud", "Amazon Simple Storage Service"),
    "gcp": ("Compute Engine", "Cloud Storage"),
    "azure": ("Virtual Machines", "Storage Accounts"),
    "lambda": ("Lambda Cloud Instances", "Lambda Cloud Storage"),
    "runpod": ("RunPod Pods", "RunPod Network Volumes"),
    "local": ("Local Executor", "Local Checkpoint Storage"),
}

# Clusters the user already has (`launcher clusters`, pricing.clouds.DECLARED_CLUSTER_KINDS): the
# team's own machines at the internal rate the user declared, which does not move with demand
# (PricingCategory Standard even on a preemptible partition). kind -> (ServiceName,
# ServiceSubcategory, ResourceType).
OWNED_CLUSTER_SERVICES: Mapping[str, tuple[str, str, str]] = {
    "slurm": ("Slurm Cluster", "Other (Compute)", "Slurm Allocation"),
    "kubernetes": ("Kubernetes Cluster", "Containers", "Kubernetes Pod"),
    "ssh": ("SSH Node Pool", "Other (Compute)", "SSH Node"),
}

# The column order of the file: FOCUS columns first, then ours.
FOCUS_COLUMNS = (
    "BillingAccountId", "BillingAccountName", "BillingPeriodStart", "BillingPeriodEnd",
    "ChargePeriodStart", "ChargePeriodEnd", "BillingCurrency", "BilledCost", "EffectiveCost",
    "ListCost", "ContractedCost", "ChargeCategory", "ChargeClass", "ChargeDescription",
    "ChargeFrequency", "InvoiceId", "InvoiceIssuerName", "ProviderName", "PublisherName",
    "ServiceCategory", "ServiceSubcategory", "ServiceName", "RegionId", "RegionName",
    "AvailabilityZone", "ResourceId", "ResourceName", "ResourceType", "SkuId",
    "PricingCategory", "PricingQuantity", "PricingUnit", "ListUnitPrice",
    "ConsumedQuantity", "ConsumedUnit", "Tags",
)  # fmt: skip
X_COLUMNS = (
    "x_ChargeKind", "x_AttemptId", "x_RunId", "x_ProjectId", "x_ExperimentId", "x_Owner",
    "x_CostCenter", "x_InstanceType", "x_Accelerator", "x_Spot", "x_UnitPriceUsdPerHour",
    "x_ComputeCost", "x_CheckpointStorageCost", "x_SpotSavings", "x_WastedCost",
    "x_RestartOverheadCost", "x_PreemptionLossCost", "x_IdleCost", "x_NodeHours",
    "x_GpuHours", "x_Preemptions", "x_Attempts", "x_Runs",
)  # fmt: skip


@dataclass(frozen=True)
class BillingAccount:
    id: str
    name: str


def default_accounts(ledger_url: str, clouds: list[str]) -> dict[str, BillingAccount]:
    """A stable id per cloud for this ledger, for clouds whose account the caller did not name."""
    digest = hashlib.sha256(ledger_url.encode()).hexdigest()[:12]
    return {
        c: BillingAccount(id=f"{c}-{digest}", name=f"{F.provider_name(c)} (launcher ledger {digest})")
        for c in clouds
    }


def focus_dataset(
    data: LedgerData,
    query: ReportQuery,
    accounts: Mapping[str, BillingAccount],
    named: Mapping[str, BillingAccount] | None = None,
) -> ReportResult:
    """Compute and storage charges as one FOCUS frame (result.frame), sorted by period.
    `named`: accounts the user named per cloud (win over recorded ones); `accounts`: the
    fallback per cloud where no account was recorded."""
    no_ck = replace(data, facts=replace(data.facts, checkpoints=data.facts.checkpoints.iloc[0:0]))
    compute = report_from_data(no_ck, replace(query, by=("attempt", "month"), tight_periods=True))
    window = compute.window
    only_ck = replace(data, attempts=data.attempts.iloc[0:0])
    storage = report_from_data(only_ck, replace(query, by=("run", "cloud", "month"), window=window, tight_periods=True))
    frames = [
        f
        for f in (_compute_rows(compute.frame, data.attempts), _storage_rows(storage.frame, data, query))
        if len(f)
    ]
    frame = pd.concat(frames, ignore_index=True) if frames else _compute_rows(compute.frame, data.attempts)
    frame = _add_accounts(frame, accounts, named or {}, data.attempts)
    frame = frame.sort_values(["ChargePeriodStart", "x_ChargeKind", "x_RunId", "x_AttemptId"], kind="stable")
    cols = [c for c in (*FOCUS_COLUMNS, *X_COLUMNS) if c in frame.columns]
    frame = frame[cols].reset_index(drop=True)
    return ReportResult(frame=frame, query=query, window=window, as_of=compute.as_of, data=data)


def _billing_period(start: pd.Series) -> tuple[pd.Series, pd.Series]:
    s = start.dt.tz_convert("UTC").dt.floor("D") - pd.to_timedelta(start.dt.day - 1, unit="D")
    return s, s + pd.offsets.MonthBegin(1)


def _compute_rows(f: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    out = f.copy()
    out["BillingPeriodStart"], out["BillingPeriodEnd"] = _billing_period(out["ChargePeriodStart"])
    out["x_ChargeKind"] = "compute"
    out["ChargeClass"] = None
    out["ChargeFrequency"] = "Usage-Based"
    cloud = _cloud_of(out["x_AttemptId"], attempts)
    out["PublisherName"] = out["ProviderName"]
    out["InvoiceIssuerName"] = out["ProviderName"]
    out["ServiceName"] = [SERVICE_NAMES.get(c, (f"{F.provider_name(c)} Compute", ""))[0] for c in cloud]
    out["ServiceCategory"] = "Compute"
    out["ServiceSubcategory"] = "Virtual Machines"
    owned = np.array([c in OWNED_CLUSTER_SERVICES for c in cloud], dtype=bool)
    if owned.any():
        service, subcategory, resource_type = (
            [OWNED_CLUSTER_SERVICES[c][i] for c in np.asarray(cloud, dtype=object)[owned]] for i in range(3)
        )
        out.loc[owned, "ServiceName"] = service
        out.loc[owned, "ServiceSubcategory"] = subcategory
        out.loc[owned, "ResourceType"] = resource_type
        out.loc[owned, "PricingCategory"] = "Standard"
    out["RegionName"] = out["RegionId"]
    out["ResourceName"] = out["ResourceId"]
    # average unit prices over the charge (price history), so cost = unit price x quantity
    q = out["PricingQuantity"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        list_unit = np.where(q > 0, out["ListCost"].to_numpy(dtype="float64") / q, out["ListUnitPrice"].to_numpy(dtype="float64"))
    out["ListUnitPrice"] = list_unit
    out["ConsumedQuantity"] = out["PricingQuantity"]
    out["ConsumedUnit"] = "Hours"
    spot = out["x_Spot"].to_numpy(dtype=bool)
    nodes = out["x_NodeHours"].to_numpy(dtype="float64")
    market = {(False, True): "spot", (False, False): "on-demand", (True, True): "preemptible", (True, False): "dedicated"}
    out["ChargeDescription"] = [
        f"{it} {market[(bool(o), bool(s))]} machine time ({acc or 'no accelerator'}), attempt {aid}"
        for it, s, o, acc, aid in zip(
            out["x_InstanceType"], spot, owned, out["x_Accelerator"].fillna(""), out["x_AttemptId"]
        )
    ]
    del nodes
    if "Tags" not in out:
        out["Tags"] = "{}"
    return out


def _cloud_of(attempt_ids: pd.Series, attempts: pd.DataFrame) -> list[str]:
    by_id = dict(zip(attempts["attempt_id"].to_numpy(), attempts["cloud"].to_numpy()))
    return [str(by_id.get(a, "")) for a in attempt_ids.to_numpy()]


def _storage_rows(f: pd.DataFrame, data: LedgerData, query: ReportQuery) -> pd.DataFrame:
    f = f[f["x_CheckpointStorageCost"] > 0].copy()
    if f.empty:
        return f
    runs = _run_keys(data)
    out = pd.DataFrame(index=f.index)
    out["ChargePeriodStart"], out["ChargePeriodEnd"] = f["ChargePeriodStart"], f["ChargePeriodEnd"]
    out["BillingPeriodStart"], out["BillingPeriodEnd"] = _billing_period(f["ChargePeriodStart"])
    cost = f["x_CheckpointStorageCost"].to_numpy(dtype="float64")
    provider = f["ProviderName"]
    # ProviderName holds the display name; get the cloud back for prices and service names
    cloud = provider.map({v: k for k, v in F.PROVIDER_NAMES.items()}).fillna(provider)
    price = query.assumptions.storage_price(cloud)
    with np.errstate(divide="ignore", invalid="ignore"):
        gb_month = np.where(price > 0, cost / price, 0.0)
    out["x_ChargeKind"] = "checkpoint-storage"
    out["BillingCurrency"] = F.CURRENCY
    for c in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost"):
        out[c] = cost
    out["ChargeCategory"] = "Usage"
    out["ChargeClass"] = None
    out["ChargeFrequency"] = "Usage-Based"
    out["ProviderName"] = provider
    out["PublisherName"] = provider
    out["InvoiceIssuerName"] = provider
    out["ServiceName"] = [SERVICE_NAMES.get(c, ("", f"{F.provider_name(c)} Storage"))[1] for c in cloud]
    out["ServiceCategory"] = "Storage"
    out["ServiceSubcategory"] = "Object Storage"
    run_ids = f["x_RunId"].to_numpy()
    out["ResourceId"] = [f"checkpoints/{r}" for r in run_ids]
    out["ResourceName"] = out["ResourceId"]
    out["ResourceType"] = "Checkpoint Storage"
    out["SkuId"] = "checkpoint-storage"
    out["PricingCategory"] = "Standard"
    out["PricingQuantity"] = gb_month
    out["PricingUnit"] = "GB-Months"
    out["ListUnitPrice"] = price
    out["ConsumedQuantity"] = gb_month
    out["ConsumedUnit"] = "GB-Months"
    out["ChargeDescription"] = [f"checkpoint storage of run {r} ({gb * HOURS_PER_MONTH:,.1f} GB-hours)" for r, gb in zip(run_ids, gb_month)]
    out["x_RunId"] = run_ids
    out["x_AttemptId"] = None
    for col, src in (("x_ProjectId", "project"), ("x_ExperimentId", "experiment"), ("x_Owner", "owner"), ("x_CostCenter", "cost_center")):
        out[col] = [runs.get(r, {}).get(src) for r in run_ids]
    out["Tags"] = [json.dumps(runs.get(r, {}).get("tags") or {}, sort_keys=True) for r in run_ids]
    out["x_CheckpointStorageCost"] = cost
    for c in ("x_ComputeCost", "x_SpotSavings", "x_WastedCost", "x_RestartOverheadCost", "x_PreemptionLossCost",
              "x_IdleCost", "x_NodeHours", "x_GpuHours"):  # fmt: skip
        out[c] = 0.0
    for c in ("x_Preemptions", "x_Attempts", "x_Runs"):
        out[c] = 0
    return out.reset_index(drop=True)


def _run_keys(data: LedgerData) -> dict[str, dict]:
    """Run id -> its project/experiment/owner/cost_center/tags, from the attempts frame."""
    a = data.attempts
    cols = [c for c in ("project", "experiment", "owner", "cost_center", "tags") if c in a]
    first = a.drop_duplicates("run_id")
    return {rid: {c: first[c].iloc[i] for c in cols} for i, rid in enumerate(first["run_id"].to_numpy())}


def _add_accounts(
    frame: pd.DataFrame,
    accounts: Mapping[str, BillingAccount],
    named: Mapping[str, BillingAccount],
    attempts: pd.DataFrame,
) -> pd.DataFrame:
    fallback = {F.provider_name(c): acct for c, acct in accounts.items()}
    by_name = {F.provider_name(c): acct for c, acct in named.items()}
    by_attempt: dict[str, BillingAccount] = {}
    by_run: dict[tuple[str, str], BillingAccount] = {}  # (run, provider): its attempts' account
    if "billing_account_id" in attempts:
        rec = attempts[attempts["billing_account_id"].notna()]
        for aid, rid, cloud, acct_id, name in zip(
            rec["attempt_id"], rec["run_id"], rec["cloud"], rec["billing_account_id"], rec["billing_account_name"]
        ):
            acct = BillingAccount(id=str(acct_id), name=str(name) if isinstance(name, str) and name else str(acct_id))
            by_attempt[aid] = acct
            by_run.setdefault((rid, F.provider_name(cloud)), acct)
    chosen = [
        by_name.get(p) or by_attempt.get(aid) or by_run.get((rid, p)) or fallback.get(p)
        for p, aid, rid in zip(frame["ProviderName"], frame["x_AttemptId"], frame["x_RunId"])
    ]
    frame["BillingAccountId"] = [a.id if a else None for a in chosen]
    frame["BillingAccountName"] = [a.name if a else None for a in chosen]
    frame["InvoiceId"] = None  # no charge of ours is on an invoice (FOCUS: then null)
    return frame


def build_focus(
    ledger, query: ReportQuery, *, now=None, accounts: Mapping[str, BillingAccount] | None = None
) -> ReportResult:
    """Read the ledger (every key and the runs' tags) and build the FOCUS dataset."""
    from launcher.report.build import KEY_SOURCES
    from launcher.report.load import load_ledger_data

    a = query.assumptions
    data = load_ledger_data(
        ledger, query.window, keys=KEY_SOURCES, with_tags=True, checkpoint_keep_last=a.checkpoint_keep_last,
        retention_s=a.checkpoint_retention_after_run_s, now=now,
    )  # fmt: skip
    clouds = sorted({*map(str, data.attempts["cloud"].dropna()), *map(str, data.facts.checkpoints.get("cloud", pd.Series(dtype=object)).dropna())})
    return focus_dataset(data, query, default_accounts(ledger.url, clouds), accounts)
