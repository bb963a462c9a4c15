"""Offers as a compact columnar table: numpy arrays, text as integer codes into sorted names.

This is what ranking reads. It is built from the parsed catalog (pandas) once, stored as one
binary file (a JSON header, then the raw arrays, with a sha256 of them), and loaded by `launcher offers`
with numpy alone: no pandas, no pyarrow on that path. Codes index sorted names, so comparing
codes orders rows as comparing the names would; -1 means missing and sorts first.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TEXT_COLUMNS = ("cloud", "region", "zone", "instance_type", "accelerator", "accelerator_family", "interruption_band")
FLOAT_COLUMNS = (
    "vcpus", "memory_gib", "gpu_memory_gib", "price_usd_per_hour", "on_demand_price_usd_per_hour", "hazard_per_hour",
)  # fmt: skip
FORMAT_VERSION = 1
MAGIC = b"LAUNCHER-OFFERS\n"


class TableFileError(ValueError):
    """A stored table is missing, torn, of another version, or built from other sources."""


@dataclass(frozen=True)
class UnpricedGpu:
    """GPU rows a catalog lists that form no offer, and why (e.g. no host VM row in their zones)."""

    cloud: str
    accelerator: str
    accelerator_count: int
    zones: int
    reason: str


@dataclass(frozen=True, eq=False)
class OfferTable:
    codes: dict[str, np.ndarray]  # text column -> int32 codes into names[column], -1 = missing
    names: dict[str, tuple[str, ...]]  # text column -> sorted distinct values
    floats: dict[str, np.ndarray]  # float64 columns, NaN = unknown
    accelerator_count: np.ndarray  # int32
    spot: np.ndarray  # bool
    unpriced: tuple[UnpricedGpu, ...] = ()

    def __len__(self) -> int:
        return len(self.spot)

    def code(self, column: str, value: str) -> int:
        """The code of `value` in `column`, or -2 (matches no row) when absent."""
        names = self.names[column]
        i = bisect_left(names, value)
        return i if i < len(names) and names[i] == value else -2

    def eq(self, column: str, value: str) -> np.ndarray:
        return self.codes[column] == self.code(column, value)

    def isin(self, column: str, values) -> np.ndarray:
        wanted = [c for c in (self.code(column, v) for v in values) if c >= 0]
        codes = self.codes[column]
        if len(wanted) == 1:
            return codes == wanted[0]
        return np.isin(codes, wanted)

    def present(self, column: str, mask: np.ndarray | None = None) -> tuple[str, ...]:
        """Distinct values of `column` in the rows of `mask` (all rows when None), sorted."""
        codes = self.codes[column] if mask is None else self.codes[column][mask]
        names = self.names[column]
        # bincount, not np.unique: unique imports numpy.ma (tens of ms) on first use
        seen = np.bincount(codes[codes >= 0], minlength=len(names))
        return tuple(names[i] for i in np.flatnonzero(seen).tolist())

    def text(self, column: str, rows: np.ndarray) -> list[str | None]:
        names = self.names[column]
        return [names[c] if c >= 0 else None for c in self.codes[column][rows].tolist()]

    # ---- building from the parsed catalog (pandas is only imported by the caller) ------------

    @classmethod
    def from_frame(cls, df, unpriced: tuple[UnpricedGpu, ...] = ()) -> OfferTable:
        codes, names = {}, {}
        for col in TEXT_COLUMNS:
            codes[col], names[col] = _encode(df[col])
        return cls(
            codes=codes,
            names=names,
            floats={c: df[c].to_numpy(dtype="float64", na_value=np.nan) for c in FLOAT_COLUMNS},
            accelerator_count=df["accelerator_count"].to_numpy(dtype="int32"),
            spot=df["spot"].to_numpy(dtype=bool),
            unpriced=tuple(unpriced),
        )

    # ---- the stored form ----------------------------------------------------------------------
    # MAGIC, an 8-byte little-endian header length, a JSON header (format, signature, names,
    # unpriced rows, each array's dtype/offset/length, the payload's sha256), then the raw arrays.
    # Read with np.frombuffer: no pickles, and none of numpy.lib's file machinery to import.

    def _arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for col in TEXT_COLUMNS:
            out[f"codes.{col}"] = np.ascontiguousarray(self.codes[col], dtype="<i4")
        for col in FLOAT_COLUMNS:
            out[f"floats.{col}"] = np.ascontiguousarray(self.floats[col], dtype="<f8")
        out["accelerator_count"] = np.ascontiguousarray(self.accelerator_count, dtype="<i4")
        out["spot"] = np.ascontiguousarray(self.spot, dtype="|b1")
        return out

    def to_bytes(self, signature: str) -> bytes:
        arrays, layout, chunks, offset = self._arrays(), {}, [], 0
        for key, a in arrays.items():
            layout[key] = [a.dtype.str, offset, len(a)]
            chunks.append(a.tobytes())
            offset += a.nbytes
        payload = b"".join(chunks)
        header = {
            "format": FORMAT_VERSION,
            "signature": signature,
            "rows": len(self),
            "names": {c: list(self.names[c]) for c in TEXT_COLUMNS},
            "unpriced": [u.__dict__ for u in self.unpriced],
            "arrays": layout,
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        head = json.dumps(header, sort_keys=True).encode()
        return MAGIC + len(head).to_bytes(8, "little") + head + payload

    @classmethod
    def from_bytes(cls, data: bytes, signature: str) -> OfferTable:
        """TableFileError unless `data` is a whole table of this format built from `signature`."""
        try:
            if data[: len(MAGIC)] != MAGIC:
                raise ValueError("not a table file")
            n = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
            start = len(MAGIC) + 8 + n
            header = json.loads(data[len(MAGIC) + 8 : start])
        except ValueError as e:
            raise TableFileError(f"unreadable ({e})") from e
        if header.get("format") != FORMAT_VERSION or header.get("signature") != signature:
            raise TableFileError("built from other sources")
        payload = memoryview(data)[start:]
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise TableFileError("content hash mismatch (torn or altered)")
        arrays = {}
        for key, (dtype, offset, length) in header["arrays"].items():
            arrays[key] = np.frombuffer(payload, dtype=np.dtype(dtype), count=length, offset=offset)
        return cls(
            codes={c: arrays[f"codes.{c}"] for c in TEXT_COLUMNS},
            names={c: tuple(header["names"][c]) for c in TEXT_COLUMNS},
            floats={c: arrays[f"floats.{c}"] for c in FLOAT_COLUMNS},
            accelerator_count=arrays["accelerator_count"],
            spot=arrays["spot"],
            unpriced=tuple(UnpricedGpu(**u) for u in header.get("unpriced", ())),
        )

    @classmethod
    def load(cls, path: Path, signature: str) -> OfferTable:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise TableFileError(f"{path}: {e.strerror or e}") from e
        try:
            return cls.from_bytes(data, signature)
        except TableFileError as e:
            raise TableFileError(f"{path}: {e}") from None


def _encode(s) -> tuple[np.ndarray, tuple[str, ...]]:
    """pandas Series -> (int32 codes, sorted names); missing values get -1."""
    import pandas as pd

    cat = s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")
    cats = [str(c) for c in cat.cat.categories]
    codes = cat.cat.codes.to_numpy().astype("int32")
    order = sorted(range(len(cats)), key=cats.__getitem__)
    remap = np.empty(len(cats) + 1, dtype="int32")
    remap[np.asarray(order, dtype="int64")] = np.arange(len(cats), dtype="int32")
    remap[-1] = -1  # code -1 (missing) indexes the last slot
    return remap[codes], tuple(cats[i] for i in order)

