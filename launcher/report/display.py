"""The report as people read it in a terminal table or the HTML page: key columns and the
headline measures, money in cents (never a non-zero amount shown as zero), text cells with
control characters escaped."""

from __future__ import annotations

import math
import re

import pandas as pd

from launcher.money import usd

TIME_COLUMNS = ("ChargePeriodStart", "ChargePeriodEnd")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What the terminal table shows (files carry every column).
TABLE_COLUMNS = (
    "ChargePeriodStart", "BilledCost", "ListCost", "x_SpotSavings", "x_WastedCost",
    "x_CheckpointStorageCost", "x_GpuHours", "x_Preemptions", "x_Runs", "x_Attempts",
)  # fmt: skip
KEY_COLUMNS = (
    "x_ExperimentId", "x_ProjectId", "x_Owner", "x_CostCenter", "ProviderName", "RegionId",
    "x_RunId", "x_AttemptId",
)  # fmt: skip


def printable(value: object) -> object:
    """Control characters in text (terminal escapes) shown as \\xNN instead of sent to the terminal."""
    if isinstance(value, str) and _CONTROL.search(value):
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


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
            shown[c] = shown[c].map(usd)
        elif c.endswith("Hours"):
            shown[c] = shown[c].map(lambda v: f"{v:,.1f}" if v == 0 or abs(v) >= 0.05 else "< 0.1")
        elif not pd.api.types.is_numeric_dtype(shown[c].dtype):
            shown[c] = shown[c].astype(object).map(printable)
    return shown
