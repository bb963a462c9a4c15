"""Opening the ledger: at head it is one read of alembic_version (no Alembic import); an older
ledger is upgraded; one at a revision this launcher does not know is refused, untouched."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import inspect, text

from launcher.errors import ExitCode, ProviderError
from launcher.ledger import Ledger
from launcher.ledger.engine import SCHEMA_HEAD, make_engine
from tests.conftest import REPO
from tests.ledger.helpers import ledger_at

OPEN = (
    "import sys\n"
    "from launcher.ledger import Ledger\n"
    "Ledger(sys.argv[1]).close()\n"
    "print('alembic' in sys.modules)\n"
)


def _revision(url: str) -> str:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()


def _open_in_child(url: str) -> bool:
    """Open the ledger in a fresh interpreter; whether Alembic was imported."""
    p = subprocess.run([sys.executable, "-c", OPEN, url], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip() == "True"


def test_a_ledger_at_head_opens_without_alembic(ledger_url: str) -> None:
    Ledger(ledger_url).close()  # PostgreSQL: the schema starts empty
    assert _revision(ledger_url) == SCHEMA_HEAD
    assert _open_in_child(ledger_url) is False


def test_an_older_ledger_is_upgraded_to_head(ledger_url: str) -> None:
    assert "billing_account_id" not in ledger_at(ledger_url, "0005_leases")["attempts"]
    assert _revision(ledger_url) == "0005_leases"
    assert _open_in_child(ledger_url) is True  # the upgrade is Alembic's job
    assert _revision(ledger_url) == SCHEMA_HEAD
    engine = make_engine(ledger_url)
    with engine.connect() as conn:
        assert "billing_account_id" in {c["name"] for c in inspect(conn).get_columns("attempts")}
    engine.dispose()


def test_a_newer_ledger_is_refused_and_left_as_it_is(ledger_url: str) -> None:
    Ledger(ledger_url).close()
    engine = make_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    engine.dispose()
    with pytest.raises(ProviderError) as e:
        Ledger(ledger_url)
    assert e.value.exit_code == ExitCode.PROVIDER
    assert "schema revision '0099_from_the_future'" in e.value.message
    assert f"(schema {SCHEMA_HEAD})" in e.value.message and "newer gpu-launcher" in e.value.message
    assert "upgrade gpu-launcher" in (e.value.hint or "")
    assert _revision(ledger_url) == "0099_from_the_future"
