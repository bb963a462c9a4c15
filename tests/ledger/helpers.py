"""Small builders shared by the ledger tests."""

from __future__ import annotations

import itertools

from launcher.ledger import NewAttempt, RunRecord

_ids = itertools.count(1)


def make_run(run_id: str | None = None, **kw: object) -> RunRecord:
    n = next(_ids)
    fields: dict[str, object] = {
        "run_id": run_id or f"r-20261101-120000-{n:06x}",
        "name": "train",
        "spec_hash": "ab" * 32,
        "spec_yaml": "name: train\nrun: echo hi\n",
        "project": "vision",
        "experiment": "resnet",
        "owner": "ada",
        "cost_center": "cc-1",
    }
    fields.update(kw)
    return RunRecord(**fields)  # type: ignore[arg-type]


def gpu_attempt(**kw: object) -> NewAttempt:
    fields: dict[str, object] = {
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instance_type": "g5.xlarge",
        "accelerator": "A10G",
        "accelerator_count": 1,
        "num_nodes": 1,
        "spot": True,
        "price_usd_per_hour": 0.5,
        "on_demand_price_usd_per_hour": 1.0,
    }
    fields.update(kw)
    return NewAttempt(**fields)  # type: ignore[arg-type]


def ledger_at(url: str, revision: str) -> dict[str, set[str]]:
    """A ledger created at head, then downgraded by Alembic to `revision`: table -> column names."""
    from alembic import command
    from sqlalchemy import inspect

    from launcher.ledger import Ledger
    from launcher.ledger.engine import alembic_config, make_engine

    Ledger(url).close()
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), revision)
        with engine.connect() as conn:
            insp = inspect(conn)
            return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}
    finally:
        engine.dispose()
