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
from launcher.report.display import display_frame, printable  # noqa: F401  (the table view)

FORMATS = ("table", "csv", "parquet", "json", "html")
# --output suffix -> format (a file's format follows its name unless --format says otherwise)
SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json", ".html": "html", ".htm": "html"}
# OWASP CSV injection: text cells starting with these are taken for formulas by spreadsheets
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
ISO = "%Y-%m-%dT%H:%M:%SZ"
def format_for_output(output: Path) -> str:
    """The format an --output file's suffix names; BadInputError naming the formats otherwise."""
    fmt = SUFFIX_FORMATS.get(output.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(SUFFIX_FORMATS))
        raise BadInputError(
            f"--output {output}: unknown file type {output.suffix or '(no suffix)'!r}",
            hint=f"name the file with one of {known}, or pass --format csv|parquet|json|html",
        )
    return fmt


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
    return csv_safe(result.frame).to_csv(index=False, date_format=ISO, lineterminator="\n")


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells that a spreadsheet would run as a formula get a leading apostrophe (OWASP).
    Only text columns: numbers (negative ones too) stay numbers."""
    out = frame
    for c in frame.columns:
        col = frame[c]
        if col.dtype != object and not pd.api.types.is_string_dtype(col.dtype):
            continue
        risky = col.map(lambda v: isinstance(v, str) and v.startswith(_FORMULA_START))
        if risky.any():
            if out is frame:
                out = frame.copy()
            out[c] = col.where(~risky, "'" + col.astype(object).where(risky, ""))
    return out


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
    from launcher.paths import user_umask

    atomic_write_bytes(output, data, mode=0o666 & ~user_umask())  # a file for the user, as open() makes
    return len(data)
