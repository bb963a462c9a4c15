"""Ledger fixtures: every core test runs on SQLite and, when LAUNCHER_TEST_PG_URL is set, on a
real PostgreSQL server in a schema of its own (so tests are independent and xdist-safe)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from launcher.ledger import Ledger

PG_URL = os.environ.get("LAUNCHER_TEST_PG_URL")
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self, start: datetime = T0) -> None:
        self.t = start

    def __call__(self) -> datetime:
        return self.t

    def advance(self, **kw: float) -> datetime:
        self.t += timedelta(**kw)
        return self.t


def _pg_schema_url(base: str) -> Iterator[str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite ledger migrated to head once per session; tests get a copy (saves ~0.3 s each)."""
    path = tmp_path_factory.mktemp("ledger-template") / "ledger.db"
    Ledger(f"sqlite:///{path}").close()
    assert not Path(str(path) + "-wal").exists()  # closed cleanly: the file is self-contained
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request, tmp_path: Path, migrated_sqlite: Path) -> Iterator[str]:
    """A migrated, empty ledger of its own (SQLite copy of the template, or a fresh PG schema)."""
    if request.param == "sqlite":
        shutil.copyfile(migrated_sqlite, tmp_path / "ledger.db")
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    if not PG_URL:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    yield from _pg_schema_url(PG_URL)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_ledger_url(request, tmp_path: Path) -> Iterator[str]:
    """An empty database nobody has migrated yet (for migration and first-open races)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh' / 'ledger.db'}"
        return
    if not PG_URL:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    yield from _pg_schema_url(PG_URL)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(ledger_url: str, clock: FakeClock) -> Iterator[Ledger]:
    with Ledger(ledger_url, now=clock) as led:
        yield led
