"""Report output formats: table (for people), csv, parquet, json, html.

Files are written atomically; parquet needs an --output file (it is binary).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from launcher.errors import BadInputError, UnknownNameError
from launcher.report.build import ReportResult

FORMATS = ("table", "csv", "parquet", "json", "html")
ISO = "%Y-%m-%dT%H:%M:%SZ"
TIME_COLUMNS = ("ChargePeriodStart", "ChargePeriodEnd")
# What the terminal table shows (files carry every column).
TABLE_COLUMNS = (
    "ChargePeriodStart", "BilledCost", "ListCost", "x_SpotSavings", "x_WastedCost",
    "x_CheckpointStorageCost", "x_GpuHours", "x_Preemptions", "x_Runs", "x_Attempts",
)  # fmt: skip
KEY_COLUMNS = (
    "x_ExperimentId", "x_ProjectId", "x_Owner", "x_CostCenter", "ProviderName", "RegionId",
    "x_RunId", "x_AttemptId",
)  # fmt: skip


def check_format(fmt: str, output: Path | None) -> str:
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        raise UnknownNameError("format", fmt, FORMATS, extra=" for --format")
    if fmt == "parquet" and output is None:
        raise BadInputError("--format parquet needs --output FILE (parquet is binary)")
    if output is not None and output.exists() and output.is_dir():
        raise BadInputError(f"--output {output} is a directory")
    return fmt


def to_csv(result: ReportResult) -> str:
    return result.frame.to_csv(index=False, date_format=ISO, lineterminator="\n")


def to_parquet(result: ReportResult) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(result.frame, preserve_index=False)
    meta = {
        b"launcher.report.by": ",".join(result.query.by).encode(),
        b"launcher.report.window": _window_json(result).encode(),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _window_json(result: ReportResult) -> str:
    w = result.window
    return json.dumps({"since": w.since.strftime(ISO) if w.since else None, "until": w.until.strftime(ISO) if w.until else None})


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, pd.Timestamp):
        return v.strftime(ISO)
    if v is pd.NaT:
        return None
    return v


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cols = list(frame.columns)
    out = []
    for row in frame.itertuples(index=False, name=None):
        out.append({c: _clean(v.item() if hasattr(v, "item") else v) for c, v in zip(cols, row)})
    return out


def to_json(result: ReportResult) -> str:
    doc = {
        "by": list(result.query.by),
        "window": json.loads(_window_json(result)),
        "as_of": result.as_of.strftime(ISO),
        "currency": "USD",
        "totals": {k: round(v, 6) for k, v in result.totals().items()},
        "rows": records(result.frame),
    }
    return json.dumps(doc, indent=2)


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Key columns plus the headline measures, money rounded to cents, for people."""
    keys = [c for c in KEY_COLUMNS if c in frame.columns]
    cols = keys + [c for c in TABLE_COLUMNS if c in frame.columns and c not in keys]
    shown = frame[cols].copy()
    for c in TIME_COLUMNS:
        if c in shown:
            shown[c] = shown[c].dt.strftime("%Y-%m-%d %H:%M")
    for c in shown.columns:
        if c.endswith("Cost") or c in ("x_SpotSavings",):
            shown[c] = shown[c].map(lambda v: f"{v:,.2f}")
        elif c.endswith("Hours"):
            shown[c] = shown[c].map(lambda v: f"{v:,.1f}")
    return shown


def render(result: ReportResult, fmt: str) -> bytes:
    if fmt == "csv":
        return to_csv(result).encode()
    if fmt == "json":
        return (to_json(result) + "\n").encode()
    if fmt == "parquet":
        return to_parquet(result)
    if fmt == "html":
        from launcher.report.html import render_html

        return render_html(result).encode()
    raise ValueError(f"render() does not do {fmt!r}")


def write(result: ReportResult, fmt: str, output: Path) -> int:
    from launcher.atomic import atomic_write_bytes

    data = render(result, fmt)
    atomic_write_bytes(output, data)
    return len(data)
