"""One run as a JSON-ready dict: what `launcher status`, `runs list|show` and the server show."""

from __future__ import annotations

from datetime import UTC, datetime


def run_summary(ledger, run, *, now: datetime | None = None) -> dict:
    """One run as a JSON-ready dict (status, list and show share it)."""
    from launcher.controller.liveness import controller_liveness

    now = now or datetime.now(UTC)
    attempts = ledger.attempts(run.run_id)
    live = controller_liveness(ledger, run, now=now)
    last = attempts[-1] if attempts else None
    return {
        "run_id": run.run_id,
        "name": run.name,
        "state": run.state,
        "end_reason": run.end_reason,
        "project": run.project,
        "experiment": run.experiment,
        "owner": run.owner,
        "created_at": run.created_at,
        "ended_at": run.ended_at,
        "attempts": len(attempts),
        "current": None
        if last is None
        else {
            "seq": last.seq, "cloud": last.cloud, "region": last.region, "zone": last.zone, "instance_type": last.instance_type,
            "spot": last.spot, "state": last.state, "end_reason": last.end_reason, "exit_code": last.exit_code,
        },  # fmt: skip
        "cost_usd": round(sum(ledger.attempt_costs_usd(run.run_id, now=now).values()), 6),
        "controller": None if run.is_terminal else ("alive" if live.alive else "orphaned"),
        "controller_detail": None if run.is_terminal else live.why,
    }


def run_detail(ledger, rec, *, now: datetime | None = None) -> dict:
    """`runs show`: the summary plus provenance, tags, attempts and events."""
    from dataclasses import asdict

    now = now or datetime.now(UTC)
    summary = run_summary(ledger, rec, now=now)
    attempts = ledger.attempts(rec.run_id)
    events = ledger.events(rec.run_id)
    costs = ledger.attempt_costs_usd(rec.run_id, now=now)  # as budgets and reports count them
    return {
        **summary,
        "spec_hash": rec.spec_hash,
        "code_revision": rec.code_revision,
        "code_dirty_hash": rec.code_dirty_hash,
        "lockfile_hash": rec.lockfile_hash,
        "image": rec.image,
        "image_digest": next((e.data["image_digest"] for e in reversed(events) if e.kind == "image" and e.data.get("image_digest")), None),
        "environment": _environment_summary(events),
        "seeds": rec.seeds,
        "data_hash": rec.data_hash,
        "host": rec.host,
        "launcher_version": rec.launcher_version,
        "budget_usd": rec.budget_usd,
        "deadline_at": rec.deadline_at,
        "tags": rec.tags,
        "attempt_rows": [{**asdict(a), "cost_usd": round(costs.get(a.attempt_id, 0.0), 6)} for a in attempts],
        "events": [{"id": e.id, "at": e.at, "kind": e.kind, "attempt_id": e.attempt_id, "data": e.data} for e in events],
    }


def _environment_summary(events) -> str | None:
    """The recorded Python environment in one line (the `environment` event; `runs diff` and
    `reproduce` use all of it)."""
    env = next((e.data for e in reversed(events) if e.kind == "environment"), None)
    if not env:
        return None
    return f"{env.get('implementation', '')} {env.get('python', '')}, {len(env.get('distributions', []))} distributions, sha256 {env.get('distributions_hash', '')}"
