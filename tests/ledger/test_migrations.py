"""Schema migrations: the migrated database equals the models (no drift), the head constant is
right, downgrade/upgrade round-trips, and opening an old database upgrades it."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from launcher.ledger import Ledger
from launcher.ledger.engine import SCHEMA_HEAD, alembic_config, make_engine
from launcher.ledger.models import metadata


def _diff(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, metadata)
    finally:
        engine.dispose()


def test_schema_head_constant_matches_scripts() -> None:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert heads == [SCHEMA_HEAD]


def test_migrated_schema_has_no_drift_from_models(fresh_ledger_url: str) -> None:
    ledger_url = fresh_ledger_url
    Ledger(ledger_url).close()
    assert _diff(ledger_url) == []
    engine = create_engine(ledger_url)
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            assert set(metadata.tables) <= names and "alembic_version" in names
            assert MigrationContext.configure(conn).get_current_revision() == SCHEMA_HEAD
    finally:
        engine.dispose()


def test_downgrade_to_base_then_reopen_upgrades(ledger_url: str) -> None:
    Ledger(ledger_url).close()
    engine = make_engine(ledger_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    with engine.connect() as conn:
        assert not set(metadata.tables) & set(inspect(conn).get_table_names())
    engine.dispose()
    with Ledger(ledger_url) as led:  # opening an old (empty) database migrates it to head
        assert led.list_runs() == []
    assert _diff(ledger_url) == []
