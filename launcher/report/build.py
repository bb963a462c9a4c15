"""Group attempt costs into report rows: `build_report(ledger, query)` and the pure
`report_from_data(data, query)` it wraps (tests feed the latter hand-built frames)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from launcher.errors import BadInputError, UnknownNameError
from launcher.cost.storage import storage_usd
from launcher.report import focus as F
from launcher.ledger.attempt_cost import (
    CostAssumptions,
    attempt_intervals,
    compute_segments,
    explode,
    overlap,
)
from launcher.report.data import KEY_SOURCES, LedgerData
from launcher.report.periods import Window

__all__ = ["KEY_SOURCES", "LedgerData", "ReportQuery", "ReportResult", "build_report", "report_from_data"]

# --by value -> (source column, output column)
GROUP_KEYS: dict[str, tuple[str, str]] = {
    "experiment": ("experiment", F.X_EXPERIMENT),
    "project": ("project", F.X_PROJECT),
    "owner": ("owner", F.X_OWNER),
    "cost-center": ("cost_center", F.X_COST_CENTER),
    "cloud": ("cloud", F.PROVIDER_NAME),
    "region": ("region", F.REGION_ID),
    "run": ("run_id", F.X_RUN),
    "attempt": ("attempt_id", F.X_ATTEMPT),
}
TIME_KEYS = ("day", "month")
GROUPINGS = (*GROUP_KEYS, *TIME_KEYS)
NONE_LABEL = "(none)"


def parse_by(value: str | Sequence[str]) -> tuple[str, ...]:
    """'experiment' or 'project,day' -> validated grouping keys (UnknownNameError with a hint)."""
    parts = [p.strip().lower().replace("_", "-") for p in (value.split(",") if isinstance(value, str) else value)]
    parts = [p for p in parts if p]
    if not parts:
        raise BadInputError("--by needs a grouping", hint="one of " + ", ".join(GROUPINGS))
    for p in parts:
        if p not in GROUPINGS:
            raise UnknownNameError("grouping", p, GROUPINGS, extra=" for --by")
    if len(set(parts)) != len(parts):
        raise BadInputError(f"--by lists a grouping twice: {','.join(parts)}")
    if sum(p in TIME_KEYS for p in parts) > 1:
        raise BadInputError("--by takes at most one of day, month")
    return tuple(parts)


@dataclass(frozen=True)
class ReportQuery:
    by: tuple[str, ...] = ("experiment",)
    window: Window = field(default_factory=Window)
    assumptions: CostAssumptions = field(default_factory=CostAssumptions)
    # with a day/month grouping, each row's period is its charges' own span inside the bucket
    # (FOCUS charge periods) instead of the whole bucket
    tight_periods: bool = False

    @property
    def time_key(self) -> str | None:
        """The time grouping (day or month), if any."""
        return next((k for k in self.by if k in TIME_KEYS), None)

    @property
    def key_specs(self) -> list[tuple[str, str]]:
        """(source column, output column) of each non-time grouping key, in `by` order."""
        return [GROUP_KEYS[k] for k in self.by if k in GROUP_KEYS]


@dataclass(frozen=True)
class ReportResult:
    frame: pd.DataFrame
    query: ReportQuery
    window: Window  # the effective window (open ends closed by the data and the clock)
    as_of: datetime
    data: LedgerData | None = field(default=None, repr=False, compare=False)  # for derived views

    def totals(self) -> dict[str, float]:
        cols = ["BilledCost", "ListCost", *[m for m in F.MEASURES if m != "x_Runs"]]
        return {c: float(self.frame[c].sum()) for c in cols if c in self.frame}


HTML_KEYS = ("project", "experiment")  # what the HTML report's charts group by


def build_report(
    ledger: Any,
    query: ReportQuery,
    *,
    now: datetime | None = None,
    extra_keys: Sequence[str] = (),
    use_cache: bool = False,
) -> ReportResult:
    """Read the ledger and group. `extra_keys` (key source columns, e.g. HTML_KEYS) are loaded
    too, for views derived from the same data (result.data). `use_cache` reads through the
    incremental report cache under $LAUNCHER_HOME (see cache.py). The CLI goes through
    rollup_report.build_grouped_report, which sums the ledger's cost rollup where it applies."""
    from launcher.report.load import load_ledger_data

    a = query.assumptions
    data = load_ledger_data(
        ledger,
        query.window,
        keys=list(dict.fromkeys([*(src for src, _ in query.key_specs), *extra_keys])),
        with_tags="attempt" in query.by,
        checkpoint_keep_last=a.checkpoint_keep_last,
        retention_s=a.checkpoint_retention_after_run_s,
        now=now,
        use_cache=use_cache,
    )
    return report_from_data(data, query)


def _edges(kind: str | None, since: float, until: float) -> np.ndarray:
    if kind is None or until <= since:
        return np.array([since, max(until, since)], dtype="float64")
    freq = "D" if kind == "day" else "MS"
    lo = pd.Timestamp(since, unit="s", tz=UTC)
    lo = lo.floor("D") if kind == "day" else lo.normalize().replace(day=1)
    hi = pd.Timestamp(until, unit="s", tz=UTC)
    rng = pd.date_range(lo, hi + (pd.Timedelta(days=1) if kind == "day" else pd.offsets.MonthBegin(1)), freq=freq)
    edges = rng.as_unit("ms").asi8 / 1e3
    edges = edges[(edges > since) & (edges < until)]
    return np.concatenate([[since], edges, [until]]).astype("float64")


def report_from_data(data: LedgerData, query: ReportQuery) -> ReportResult:
    attempts = data.attempts.reset_index(drop=True)
    iv = attempt_intervals(attempts, data.facts, data.as_of)
    since, until = _effective_window(query.window, iv, data.as_of)
    edges = _edges(query.time_key, since, until)
    out = grouped_segments(data, query, iv, edges, until)
    return finish_report(out, data, query, edges, since, until)


def grouped_segments(data: LedgerData, query: ReportQuery, iv: pd.DataFrame, edges: np.ndarray, until: float) -> pd.DataFrame:
    """The data's attempts and checkpoint storage grouped by the query's keys (and bucket of
    `edges`): one row per group with the key source columns, `_bucket`, the _SUMS measures,
    seg_start/seg_end and x_Runs."""
    time_key, key_specs = query.time_key, query.key_specs
    attempts = data.attempts.reset_index(drop=True)
    gpu = attempts["accelerator_count"].to_numpy(dtype="float64")
    rows, bucket, m = compute_segments(iv, attempts, edges, gpu, data.facts.prices)
    m["x_CheckpointStorageCost"] = np.zeros(len(rows))
    # keys as integer codes, factorized once per attempt (fast on categorical/arrow columns)
    codes: dict[str, np.ndarray] = {}
    uniques: dict[str, list[Any]] = {}
    for src, _ in key_specs:
        c, u = _factorize(attempts[src])
        codes[src], uniques[src] = c[rows], u
    run_codes, _runs = pd.factorize(attempts["run_id"])
    runs = run_codes[rows]
    ck = _storage_segments(data.facts.checkpoints, query, key_specs, edges, min(until, data.as_of), data.as_of)
    if ck is not None:
        ck_keys, ck_bucket, ck_m = ck
        codes = {src: np.concatenate([c, _encode(ck_keys[src], uniques[src])]) for src, c in codes.items()}
        bucket = np.concatenate([bucket, ck_bucket])
        m = {k: np.concatenate([v, ck_m.get(k, np.zeros(len(ck_bucket)))]) for k, v in m.items()}
    return _aggregate(codes, uniques, bucket if time_key else None, runs, m)


def finish_report(
    out: pd.DataFrame, data: LedgerData | None, query: ReportQuery, edges: np.ndarray, since: float, until: float,
    as_of: float | None = None,
) -> ReportResult:
    """Grouped rows -> the report: FOCUS columns, sorted, with the effective window."""
    time_key, key_specs = query.time_key, query.key_specs
    frame = _format(out, key_specs, time_key if not query.tight_periods else None, edges, sort_time=time_key is not None)
    if "attempt" in query.by:
        assert data is not None
        frame = _add_attempt_dimensions(frame, data.attempts.reset_index(drop=True))
    window = Window(datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(until, UTC))
    clock = data.as_of if data is not None else as_of
    assert clock is not None
    return ReportResult(frame=frame, query=query, window=window, as_of=datetime.fromtimestamp(clock, UTC), data=data)


def _effective_window(window: Window, iv: pd.DataFrame, as_of: float) -> tuple[float, float]:
    if window.since is not None:
        since = window.since.timestamp()
    else:
        since = float(iv["start"].min()) if len(iv) else as_of
    if window.until is not None:
        until = window.until.timestamp()
    else:
        until = max(as_of, float(iv["bill_end"].max()) if len(iv) else as_of)
    return since, max(until, since)


def _storage_segments(
    ck: pd.DataFrame,
    query: ReportQuery,
    key_specs: list[tuple[str, str]],
    edges: np.ndarray,
    horizon: float,
    as_of: float,
) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]] | None:
    """Checkpoint storage per bucket: (key arrays, bucket indices, measures), or None."""
    if ck is None or len(ck) == 0:
        return None
    a = query.assumptions
    ck = ck.reset_index(drop=True)
    run_end = ck["run_ended_at"].to_numpy(dtype="float64")
    per_run_horizon = np.fmin(np.where(np.isnan(run_end), as_of, run_end + a.checkpoint_retention_after_run_s), horizon)
    start = ck["at"].to_numpy(dtype="float64")
    end = np.fmin(ck["retain_until"].to_numpy(dtype="float64"), per_run_horizon)
    end = np.maximum(end, start)
    rows, bucket = explode(start, end, edges)
    rows_keep = end[rows] > start[rows]
    rows, bucket = rows[rows_keep], bucket[rows_keep]
    hours = overlap(start[rows], end[rows], edges[bucket], edges[bucket + 1]) / 3600.0
    gb = ck["size_bytes"].to_numpy(dtype="float64")[rows] / 1e9
    price = a.storage_price(ck["cloud"])[rows]
    keys = {src: ck[src].to_numpy(dtype="object")[rows] for src, _ in key_specs}
    measures = {
        "x_CheckpointStorageCost": np.nan_to_num(storage_usd(gb * hours, price)),
        "seg_start": np.maximum(start[rows], edges[bucket]),
        "seg_end": np.minimum(end[rows], edges[bucket + 1]),
    }
    return keys, bucket, measures


_SUMS = (
    "x_ComputeCost",
    "ListComputeCost",
    "x_CheckpointStorageCost",
    "x_NodeHours",
    "x_GpuHours",
    "x_Preemptions",
    "x_Attempts",
    "x_RestartOverheadCost",
    "x_PreemptionLossCost",
    "x_IdleCost",
)


def _factorize(values: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Codes and uniques of a key column; missing values become the group NONE_LABEL."""
    codes, uniq = pd.factorize(values, use_na_sentinel=False)
    return np.asarray(codes, dtype="int64"), [NONE_LABEL if pd.isna(u) else u for u in uniq]


def _encode(values: np.ndarray, uniques: list[Any]) -> np.ndarray:
    """Codes of `values` in `uniques`, appending values not seen yet (in place)."""
    filled = np.where(pd.isna(values), NONE_LABEL, values)
    idx = pd.Index(uniques, dtype=object).get_indexer(filled)
    missing = idx < 0
    if missing.any():
        new_codes, new = pd.factorize(filled[missing])
        idx[missing] = new_codes + len(uniques)
        uniques.extend(new.tolist())
    return idx.astype("int64")


def _aggregate(
    codes: dict[str, np.ndarray],
    uniques: dict[str, list[Any]],
    bucket: np.ndarray | None,
    runs: np.ndarray,
    measures: dict[str, np.ndarray],
) -> pd.DataFrame:
    """Group segments by integer codes (keys, bucket): sums by bincount, period bounds by
    min/max, distinct runs by unique (group, run code) pairs. `runs` covers the first len(runs)
    segments (attempts); later ones (storage) do not count runs."""
    n = len(next(iter(measures.values())))
    gid = np.zeros(n, dtype="int64")
    for src, c in codes.items():
        gid = gid * max(1, len(uniques[src])) + c
    if bucket is not None:
        gid = gid * (int(bucket.max()) + 1 if len(bucket) else 1) + bucket
    gid, _ = pd.factorize(gid)
    ng = int(gid.max()) + 1 if n else 0
    first = np.full(ng, 0, dtype="int64")
    first[gid[::-1]] = np.arange(n)[::-1]
    out: dict[str, Any] = {src: np.asarray(uniques[src], dtype=object)[codes[src][first]] for src in codes}
    if bucket is not None:
        out["_bucket"] = bucket[first]
    for name in _SUMS:
        out[name] = np.bincount(gid, weights=measures[name], minlength=ng)
    bounds = pd.DataFrame({"s": measures["seg_start"], "e": measures["seg_end"]}).groupby(gid)
    out["seg_start"] = bounds["s"].min().to_numpy()
    out["seg_end"] = bounds["e"].max().to_numpy()
    n_runs = int(runs.max()) + 1 if len(runs) else 1
    pairs = pd.unique(gid[: len(runs)] * n_runs + runs)
    out["x_Runs"] = np.bincount(pairs // n_runs, minlength=ng)
    return pd.DataFrame(out)


def _format(
    out: pd.DataFrame, key_specs: list[tuple[str, str]], time_key: str | None, edges: np.ndarray, *, sort_time: bool = False
) -> pd.DataFrame:
    if time_key:
        b = out["_bucket"].to_numpy()
        out["seg_start"], out["seg_end"] = edges[b], edges[b + 1]

    res = pd.DataFrame(index=out.index)
    for src, col in key_specs:
        values = out[src]
        res[col] = values.map(F.provider_name) if src == "cloud" else values
    res[F.CHARGE_PERIOD_START] = pd.to_datetime(out["seg_start"].to_numpy(), unit="s", utc=True)
    res[F.CHARGE_PERIOD_END] = pd.to_datetime(out["seg_end"].to_numpy(), unit="s", utc=True)
    billed = out["x_ComputeCost"] + out["x_CheckpointStorageCost"]
    res[F.BILLING_CURRENCY] = F.CURRENCY
    res[F.BILLED_COST] = billed
    res[F.EFFECTIVE_COST] = billed
    res[F.LIST_COST] = out["ListComputeCost"] + out["x_CheckpointStorageCost"]
    res[F.CONTRACTED_COST] = billed
    res[F.CHARGE_CATEGORY] = "Usage"
    res["x_ComputeCost"] = out["x_ComputeCost"]
    res["x_CheckpointStorageCost"] = out["x_CheckpointStorageCost"]
    res["x_SpotSavings"] = out["ListComputeCost"] - out["x_ComputeCost"]
    res["x_WastedCost"] = out["x_RestartOverheadCost"] + out["x_PreemptionLossCost"] + out["x_IdleCost"]
    for c in ("x_RestartOverheadCost", "x_PreemptionLossCost", "x_IdleCost", "x_NodeHours", "x_GpuHours"):
        res[c] = out[c]
    for c in ("x_Preemptions", "x_Attempts", "x_Runs"):
        res[c] = out[c].astype("int64")
    keys = [c for _, c in key_specs]
    if time_key or sort_time:
        res = res.sort_values([*keys, F.CHARGE_PERIOD_START], kind="stable")
    else:  # costs equal to the nanodollar tie (sums taken in another order differ in the last bits)
        res = res.assign(_cost=res[F.BILLED_COST].round(9))
        res = res.sort_values(["_cost", *keys], ascending=[False] + [True] * len(keys), kind="stable").drop(columns="_cost")
    return res.reset_index(drop=True)


def _add_attempt_dimensions(frame: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    """Per-attempt FOCUS dimensions for --by attempt (one row per attempt and period)."""
    a = attempts.set_index("attempt_id")
    ids = frame[F.X_ATTEMPT]
    pick = a.reindex(ids.to_numpy())
    frame = frame.copy()
    frame[F.PROVIDER_NAME] = pick["cloud"].map(F.provider_name).to_numpy()
    frame[F.REGION_ID] = pick["region"].to_numpy()
    if "zone" in pick:
        frame[F.AVAILABILITY_ZONE] = pick["zone"].to_numpy()
    cluster = pick["cluster"].to_numpy() if "cluster" in pick else np.full(len(pick), None)
    frame[F.RESOURCE_ID] = np.where(pd.isna(cluster), ids.to_numpy(), cluster)
    frame[F.RESOURCE_TYPE] = "Virtual Machine"
    frame[F.SERVICE_CATEGORY] = "Compute"
    if "instance_type" in pick:
        frame[F.SKU_ID] = pick["instance_type"].to_numpy()
        frame[F.X_INSTANCE_TYPE] = pick["instance_type"].to_numpy()
    if "accelerator" in pick:
        frame[F.X_ACCELERATOR] = pick["accelerator"].to_numpy()
    spot = pick["spot"].astype(bool).to_numpy()
    frame[F.X_SPOT] = spot
    frame[F.PRICING_CATEGORY] = np.where(spot, "Dynamic", "Standard")
    frame[F.PRICING_UNIT] = "Hours"
    frame[F.PRICING_QUANTITY] = frame["x_NodeHours"]
    frame[F.X_UNIT_PRICE] = pick["price_usd_per_hour"].to_numpy()
    od = pick["on_demand_price_usd_per_hour"].to_numpy(dtype="float64")
    frame[F.LIST_UNIT_PRICE] = np.where(np.isnan(od), frame[F.X_UNIT_PRICE], od)
    frame[F.X_PROJECT] = pick["project"].to_numpy()
    frame[F.X_EXPERIMENT] = pick["experiment"].to_numpy()
    frame[F.X_OWNER] = pick["owner"].to_numpy()
    frame[F.X_COST_CENTER] = pick["cost_center"].to_numpy()
    frame[F.X_RUN] = pick["run_id"].to_numpy()
    if "tags" in pick:
        frame[F.TAGS] = [json.dumps(t or {}, sort_keys=True) for t in pick["tags"].to_numpy()]
    return frame
