"""Read one SkyPilot `vms.csv` (schemas v7/v8) into a raw, cleaned DataFrame.

Robust to: column order, optional columns (AvailabilityZone, SpotPrice, GpuInfo, and v8 extras
such as Arch or LocalDisk* which are ignored), CRLF line endings, empty Price/SpotPrice, and
GpuInfo written as a Python-literal dict (AWS/Lambda/GCP) or as a bare name (RunPod).
"""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from pricing.errors import PricingInputError
from pricing.gpus import canonical_catalog_name

REQUIRED_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
OPTIONAL_COLUMNS = ("vCPUs", "MemoryGiB", "GpuInfo", "SpotPrice", "AvailabilityZone")

# Columns of the raw frame every reader returns (before GCP host/accelerator joining).
RAW_COLUMNS = (
    "instance_type", "accelerator", "accelerator_count", "vcpus", "memory_gib",
    "gpu_memory_gib", "region", "zone", "price", "spot_price",
)  # fmt: skip

_MIB_RE = re.compile(r"SizeInMiB'?\"?\s*:\s*([0-9.]+)")
_TOTAL_RE = re.compile(r"TotalGpuMemoryInMiB'?\"?\s*:\s*([0-9.]+)")


def read_vms_csv(source: Path | str | bytes, *, label: str = "vms.csv") -> pd.DataFrame:
    """Parse a vms.csv (path or bytes). Raises PricingInputError when required columns are missing."""
    if isinstance(source, bytes):
        buf: io.BytesIO | Path = io.BytesIO(source)
    else:
        buf = Path(source)
    # dtype=str for text columns keeps names like '8x' or zone ids intact; numbers are coerced below.
    df = pd.read_csv(buf, dtype=str, keep_default_na=False, na_values=[""], skipinitialspace=True)
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise PricingInputError(f"{label}: not a SkyPilot vms.csv (missing columns: {', '.join(missing)})")
    for c in OPTIONAL_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    out = pd.DataFrame(
        {
            "instance_type": _text(df["InstanceType"]),
            "accelerator": _accelerator_names(df["AcceleratorName"]),
            "accelerator_count": _num(df["AcceleratorCount"]).fillna(0).round().astype("int32"),
            "vcpus": _num(df["vCPUs"]),
            "memory_gib": _num(df["MemoryGiB"]),
            "region": _text(df["Region"]),
            "zone": _text(df["AvailabilityZone"]),
            "price": _num(df["Price"]),
            "spot_price": _num(df["SpotPrice"]),
        }
    )
    out["gpu_memory_gib"] = _gpu_memory_gib(df["GpuInfo"], out["accelerator_count"])
    out = out[out["region"].notna()]
    return out.loc[:, list(RAW_COLUMNS)].reset_index(drop=True)


def _text(s: pd.Series) -> pd.Series:
    s = s.astype("object")
    s = s.where(s.isna(), s.astype(str).str.strip())
    return s.replace("", np.nan)


def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype("float64")


def _accelerator_names(s: pd.Series) -> pd.Series:
    s = _text(s)
    uniq = {v: canonical_catalog_name(v) for v in s.dropna().unique()}
    return s.map(uniq)


def _gpu_memory_gib(info: pd.Series, counts: pd.Series) -> pd.Series:
    """Total GPU memory (GiB) of the instance, from GpuInfo when it carries sizes.

    Catalogs disagree on TotalGpuMemoryInMiB (Lambda writes one GPU's size), so the total is
    per-GPU size times the instance's accelerator count.
    """
    per_gpu = {v: _per_gpu_mib(v) for v in info.dropna().unique()}
    mib = info.map(per_gpu).astype("float64")
    return (mib * counts.where(counts > 0)) / 1024.0


def _per_gpu_mib(raw: str) -> float:
    raw = str(raw)
    m = _MIB_RE.search(raw)
    if m:
        return float(m.group(1))
    m = _TOTAL_RE.search(raw)
    if m:  # only a total: try to divide by the listed count
        try:
            d = ast.literal_eval(raw)
            count = sum(float(g.get("Count", 0)) for g in d.get("Gpus", [])) or 1.0
            return float(m.group(1)) / count
        except (ValueError, SyntaxError, AttributeError, TypeError):
            return float(m.group(1))
    return np.nan
