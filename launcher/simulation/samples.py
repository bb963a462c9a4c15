"""The real spot traces shipped with the package (see sample_traces/SOURCE.md), so examples run
without a copy of the full data set."""

from __future__ import annotations

from pathlib import Path

SAMPLE_TRACE_ROOT = Path(__file__).resolve().parent / "sample_traces"


def sample_trace_paths() -> list[Path]:
    """Every shipped trace file, sorted."""
    return sorted(SAMPLE_TRACE_ROOT.rglob("*.json"))
