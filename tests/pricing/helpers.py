"""Helpers shared by the pricing and CLI tests: lay out the real catalog slices, read raw rows."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

SLICE_CLOUDS = ("aws", "gcp", "lambda", "runpod")


def layout_slices(shared_data: Path, dest: Path, clouds=SLICE_CLOUDS) -> Path:
    """Copy ../shared/data/catalog/<cloud>_vms_slice.csv to dest/<cloud>/vms.csv (bytes unchanged)."""
    for cloud in clouds:
        (dest / cloud).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / "catalog" / f"{cloud}_vms_slice.csv", dest / cloud / "vms.csv")
    return dest


def raw_rows(path: Path) -> list[dict[str, str]]:
    """The CSV rows as dicts, read with the csv module only (independent of the code under test)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k.strip(): (v or "").strip() for k, v in r.items()} for r in csv.DictReader(f)]


def fnum(v: str) -> float | None:
    return float(v) if v not in ("", None) else None


def write_csv(path: Path, header: list[str], rows: list[list], newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)
    return path
