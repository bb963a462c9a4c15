"""Metrics from a job's output: JSON lines such as `task_specs/train.py` prints them.

A metric line is a JSON object with an integer `step`; each other numeric field is a metric at
that step (`{"event": "step", "step": 40, "loss": 0.31, "lr": 0.002}` -> loss and lr at step 40).
Lifecycle lines (checkpoint saved, resumed, preempted, epoch start) carry a step but no
training metrics and are skipped. The job's last line `final_weights_sha256=<hex>` is a result.

`MetricFollower` reads `logs/rank-0.log` (appended across attempts) from where it left off and
keeps each (metric, step) once: within an attempt steps only grow, and an attempt resumed from a
checkpoint replays steps at or below what was already seen, so "at most the highest step seen"
is exactly "already logged".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

LIFECYCLE_EVENTS = frozenset({"checkpoint", "resumed", "preempted", "epoch_start", "start"})
READ_BLOCK_BYTES = 4 << 20
WEIGHTS_RE = re.compile(r"^final_weights_sha256=([0-9a-f]{64})\s*$")


@dataclass(frozen=True)
class MetricPoint:
    key: str
    value: float
    step: int
    timestamp_ms: int


def parse_metric_line(line: str, timestamp_ms: int) -> list[MetricPoint]:
    """The metrics on one output line ([] when it is not a metric line)."""
    line = line.strip()
    if not line.startswith("{"):
        return []
    try:
        obj = json.loads(line)
    except ValueError:
        return []
    if not isinstance(obj, dict) or obj.get("event") in LIFECYCLE_EVENTS:
        return []
    step = obj.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return []
    out = []
    for key, value in obj.items():
        if key in ("step", "event") or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out.append(MetricPoint(str(key), float(value), step, timestamp_ms))
    return out


def parse_weights_line(line: str) -> str | None:
    m = WEIGHTS_RE.match(line.strip())
    return m.group(1) if m else None


class MetricFollower:
    """Incremental reader of one log file: new metric points (deduplicated by step) and the
    last `final_weights_sha256` seen. `logged_max` maps metric -> highest step already handed
    out; pass the saved one to continue after a controller restart."""

    def __init__(self, path: Path, logged_max: dict[str, int] | None = None) -> None:
        self.path = path
        self.max_step: dict[str, int] = dict(logged_max or {})
        self.final_weights_sha256: str | None = None
        self._offset = 0
        self._partial = b""

    def read_new(self, timestamp_ms: int, *, final: bool = False) -> list[MetricPoint]:
        """Points from complete lines written since the last call (`final`: also a last line
        without a newline). Reads in blocks, so a long log never sits in memory whole."""
        points: list[MetricPoint] = []
        try:
            f = open(self.path, "rb")
        except OSError:
            return points
        with f:
            f.seek(self._offset)
            while chunk := f.read(READ_BLOCK_BYTES):
                self._offset += len(chunk)
                *lines, self._partial = (self._partial + chunk).split(b"\n")
                self._take(lines, timestamp_ms, points)
        if final and self._partial:
            self._take([self._partial], timestamp_ms, points)
            self._partial = b""
        return points

    def _take(self, lines: list[bytes], timestamp_ms: int, points: list[MetricPoint]) -> None:
        for raw in lines:
            text = raw.decode(errors="replace")
            digest = parse_weights_line(text)
            if digest is not None:
                self.final_weights_sha256 = digest
                continue
            for p in parse_metric_line(text, timestamp_ms):
                if p.step > self.max_step.get(p.key, -1):
                    self.max_step[p.key] = p.step
                    points.append(p)

    def last_weights(self) -> str | None:
        """The last `final_weights_sha256` in the whole file (a fresh follower's one-off read)."""
        self.read_new(0, final=True)
        return self.final_weights_sha256
