"""Engine settings: SQLite durability pragmas, URL handling, unreachable databases."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from launcher.errors import BadInputError, ProviderError
from launcher.ledger import Ledger
from launcher.ledger.engine import normalize_url, to_wal
from tests.conftest import free_port


def test_sqlite_runs_in_wal_with_full_sync_and_foreign_keys(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'deep' / 'dir' / 'l.db'}") as led:  # parents are created
        with led.engine.connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert c.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
            assert c.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert c.execute(text("PRAGMA busy_timeout")).scalar() >= 10_000


def test_postgres_urls_use_psycopg3() -> None:
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"


@pytest.mark.parametrize("url", ["mysql://u@h/db", "sqlite://", "sqlite:///:memory:", "not a url"])
def test_unsupported_urls_are_bad_input(url: str) -> None:
    with pytest.raises(BadInputError):
        Ledger(url)


def test_unreachable_postgres_is_a_provider_error_with_masked_password() -> None:
    url = f"postgresql+psycopg://u:secret@127.0.0.1:{free_port()}/db?connect_timeout=2"
    with pytest.raises(ProviderError) as err:
        Ledger(url)
    assert "secret" not in str(err.value) and "127.0.0.1" in str(err.value)


class _Cursor:
    """A connection's cursor whose conversion to WAL first fails as SQLite fails it."""

    def __init__(self, failures: list[str]) -> None:
        self.failures, self.calls = failures, 0

    def execute(self, sql: str) -> None:
        assert sql == "PRAGMA journal_mode = WAL"
        self.calls += 1
        if self.failures:
            raise sqlite3.OperationalError(self.failures.pop(0))


def test_a_fresh_databases_switch_to_wal_is_retried_while_another_first_connection_holds_it() -> None:
    """Two first connections converting a fresh file at once can deadlock on the lock upgrade, and
    SQLite answers one 'database is locked' at once, without waiting: that is retried (ten processes
    opening a fresh ledger together, tests/ledger/test_concurrency.py, hit it under load)."""
    cur = _Cursor(["database is locked", "database is locked"])
    to_wal(cur)
    assert cur.calls == 3
    broken = _Cursor(["disk I/O error"])  # anything else is not waited on
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        to_wal(broken)
    assert broken.calls == 1
    stuck = _Cursor(["database is locked"] * 1000)  # and the wait is bounded
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        to_wal(stuck, within_s=0.3)
    assert time.monotonic() - t0 < 2.0 and 1 < stuck.calls < 1000


def test_a_database_already_in_wal_is_not_switched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    Ledger(url).close()
    from launcher.ledger import engine

    def no_switch(cur: object, within_s: float = 0.0) -> None:
        raise AssertionError("a WAL database was switched again")

    monkeypatch.setattr(engine, "to_wal", no_switch)
    with Ledger(url) as led, led.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
