"""Engine settings: SQLite durability pragmas, URL handling, unreachable databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from launcher.errors import BadInputError, ProviderError
from launcher.ledger import Ledger
from launcher.ledger.engine import normalize_url
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
