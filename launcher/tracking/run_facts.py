"""What a launcher run tells its tracker: params (the spec's resources and `launcher:` block),
tags (who and what, and the provenance) and the end metrics (from the ledger)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from launcher.ledger.records import EndReason

# Run tags copied to the tracker under the same names.
_COPIED_TAGS = ("project", "experiment", "owner", "cost-center", "run-id")
PROVENANCE_FIELDS = ("code_revision", "code_dirty_hash", "lockfile_hash", "image", "seeds", "data_hash", "host", "launcher_version")


def flatten(prefix: str, value: Any, out: dict[str, str]) -> dict[str, str]:
    """Nested dicts as dotted keys; lists and scalars as their JSON (strings as themselves)."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif value is not None:
        out[prefix] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def run_params(spec) -> dict[str, str]:
    data = {
        "resources": spec.resources.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
        "launcher": spec.launcher.model_dump(mode="json", exclude_none=True),
        "num_nodes": spec.num_nodes,
    }
    return flatten("", data, {})


def run_tags_for_tracker(ledger, job) -> dict[str, str]:
    run = ledger.get_run(job.run_id)
    tags = {k: run.tags[k] for k in _COPIED_TAGS if k in run.tags}
    tags["run-id"] = run.run_id
    for name in PROVENANCE_FIELDS:
        value = getattr(run, name)
        if value is not None:
            tags[f"provenance.{name}"] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if run.code_revision:
        tags["mlflow.source.git.commit"] = run.code_revision
    tags["mlflow.user"] = run.owner or run.tags.get("owner", "")
    return {k: v for k, v in tags.items() if v}


def end_numbers(ledger, run_id: str, now: datetime | None = None) -> dict[str, float]:
    """cost_usd (the ledger's one definition of an attempt's cost, as reports count it), preemptions, attempts (placements that ran
    or tried to), gpu_hours (accelerators x nodes x billed hours)."""
    now = now or datetime.now(UTC)
    attempts = ledger.attempts(run_id)
    gpu_h = 0.0
    for a in attempts:
        seconds = a.billed_seconds if a.billed_seconds is not None else max(0.0, ((a.ended_at or now) - a.started_at).total_seconds())
        gpu_h += seconds / 3600.0 * a.accelerator_count * a.num_nodes
    return {
        "cost_usd": round(sum(ledger.attempt_costs_usd(run_id, now=now).values()), 6),
        "preemptions": float(sum(1 for a in attempts if a.end_reason in (EndReason.PREEMPTED, EndReason.NODE_LOST))),
        "attempts": float(len(attempts)),
        "gpu_hours": round(gpu_h, 6),
    }


def end_metrics(ledger, run_id: str, timestamp_ms: int) -> list:
    from launcher.tracking.metrics import MetricPoint

    return [MetricPoint(k, float(v), 0, timestamp_ms) for k, v in end_numbers(ledger, run_id).items()]
