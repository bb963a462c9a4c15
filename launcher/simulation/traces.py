"""Spot availability traces in the Can't Be Late format.

`{"metadata": {"gap_seconds": G}, "data": [0|1|n, ...]}`: one value per tick of G seconds;
0 = spot capacity available, anything else = none (1 in single-node traces; multi-node traces
count the missing nodes, and a gang-scheduled job needs all of them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from launcher.bounded_read import MAX_DATA_BYTES, read_bounded_text
from launcher.errors import BadInputError


@dataclass(frozen=True)
class Trace:
    name: str
    gap_seconds: float
    available: tuple[bool, ...]  # per tick: spot capacity present

    @property
    def gap_hours(self) -> float:
        return self.gap_seconds / 3600.0

    def __len__(self) -> int:
        return len(self.available)


def parse_trace(obj: object, name: str) -> Trace:
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise BadInputError(f"trace {name}: expected an object with a 'data' list")
    meta = obj.get("metadata")
    gap = meta.get("gap_seconds") if isinstance(meta, dict) else None
    if not isinstance(gap, (int, float)) or isinstance(gap, bool) or gap <= 0:
        raise BadInputError(f"trace {name}: metadata.gap_seconds must be a positive number")
    data = obj["data"]
    if not data:
        raise BadInputError(f"trace {name}: 'data' is empty")
    for i, v in enumerate(data):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise BadInputError(f"trace {name}: data[{i}] = {v!r} is not a non-negative number")
    return Trace(name=name, gap_seconds=float(gap), available=tuple(v == 0 for v in data))


def read_json(path: Path, what: str, name: str | None = None):
    """A JSON file, or one BadInputError saying which `what` (e.g. 'trace') is missing or bad."""
    text = read_bounded_text(path, what, MAX_DATA_BYTES)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInputError(f"{what} {name or path} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None


def load_trace(path: Path, name: str | None = None) -> Trace:
    name = name or str(path)
    return parse_trace(read_json(path, "trace", name), name)
