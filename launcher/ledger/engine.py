"""Engines and schema upgrades.

SQLite: WAL (readers never block the writer; set once, when the file is fresh), busy_timeout,
synchronous=FULL (a commit is on disk before the caller proceeds, also across power loss), foreign
keys on, and write transactions begin IMMEDIATE so two writers queue on the busy timeout instead of
failing with 'database is locked' when a read transaction tries to upgrade. PostgreSQL: plain READ
COMMITTED; callers take row locks (SELECT ... FOR UPDATE) where they read-then-write.

Schema upgrades run when a Ledger opens and the stored revision is not head, under a file lock
next to the SQLite file or a PostgreSQL advisory lock, so concurrent first opens do not race.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url

from launcher.errors import BadInputError, ConflictError, ProviderError

# The newest revision in migrations/versions (test_migrations checks it matches the scripts).
SCHEMA_HEAD = "0007_cost_rollup"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_S = 60.0
_PG_LOCK_KEY = 0x6C6564676572  # "ledger"
WRITE = {"ledger_write": True}  # execution option: begin IMMEDIATE on SQLite


def sqlite_path(url: str) -> Path | None:
    u = make_url(normalize_url(url))
    if u.get_backend_name() != "sqlite":
        return None
    db = u.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db).expanduser()


def normalize_url(url: str) -> str:
    """postgres:// and postgresql:// use psycopg 3 (the driver we ship), not psycopg2."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    try:
        u = make_url(url)
    except Exception as e:  # ArgumentError: not a URL at all
        raise BadInputError(f"malformed ledger URL {url!r}: {e}") from e
    backend = u.get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(url)
        if path is None:
            raise BadInputError(f"unsupported SQLite ledger URL {url!r}: use sqlite:///PATH")
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        _sqlite_events(engine)
        return engine
    if backend == "postgresql":
        return create_engine(u, pool_pre_ping=True, pool_size=2, max_overflow=4)
    raise BadInputError(
        f"unsupported ledger database {backend!r}",
        hint="use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB in LAUNCHER_DB_URL",
    )


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite must not BEGIN on its own; we do below
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        if cur.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # kept in the file: a fresh one
            to_wal(cur)
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("ledger_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def to_wal(cur: Any, within_s: float = SQLITE_BUSY_TIMEOUT_S) -> None:
    """Switch a fresh SQLite database to WAL. Two first connections converting at once each hold a
    shared lock and want the exclusive one; SQLite then answers one of them 'database is locked' at
    once, without its busy handler (waiting could not end). So that answer is retried, jittered,
    within the busy timeout."""
    import sqlite3

    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

    locked = retry_if_exception(lambda e: isinstance(e, sqlite3.OperationalError) and "locked" in str(e))
    wait = wait_random_exponential(multiplier=0.01, max=0.5)
    for attempt in Retrying(retry=locked, stop=stop_after_delay(within_s), wait=wait, reraise=True):
        with attempt:
            cur.execute("PRAGMA journal_mode = WAL")


def current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def _stored_revision(engine: Engine) -> str | None:
    """The revision in alembic_version, read with plain SQL (no Alembic import on the fast
    path: every CLI command opens the ledger). None when the table is missing or odd."""
    with engine.connect() as conn:
        if not engine.dialect.has_table(conn, "alembic_version"):
            return None
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return rows[0] if len(rows) == 1 else None


def alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade_schema(conn: Connection) -> None:
    """Migrate to head inside the caller's open transaction, so all revisions commit together
    (or, killed half-way, not at all: SQLite and PostgreSQL both have transactional DDL).
    Alembic sees the external transaction and neither begins nor commits one of its own."""
    from alembic import command

    if not conn.in_transaction():
        raise RuntimeError("upgrade_schema needs an open transaction")
    before = current_revision(conn)
    command.upgrade(alembic_config(conn), "head")
    if before is not None:  # an existing ledger: roll up the runs that ended before the rollup existed
        from launcher.ledger.rollup import backfill

        backfill(conn)


def ensure_schema(engine: Engine, url: str) -> None:
    """Upgrade to head when needed; a no-op read when the schema is current. A revision this
    launcher does not know (a newer launcher wrote the ledger) is refused before anything is
    written."""
    stored = _stored_revision(engine)
    if stored == SCHEMA_HEAD:
        return
    if stored is not None:
        _refuse_unknown_revision(stored, url)
    if engine.dialect.name == "sqlite":
        _sqlite_upgrade_locked(engine, url)
    else:
        _pg_upgrade_locked(engine)


def _refuse_unknown_revision(stored: str, url: str) -> None:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        ScriptDirectory.from_config(alembic_config()).get_revision(stored)
    except CommandError:
        where = make_url(url).render_as_string(hide_password=True)
        raise ProviderError(
            f"the ledger at {where} has schema revision {stored!r}, which this launcher (schema {SCHEMA_HEAD}) "
            "does not know: a newer gpu-launcher wrote it",
            hint="upgrade gpu-launcher, or point LAUNCHER_DB_URL (or LAUNCHER_HOME) at another ledger",
        ) from None


def _sqlite_upgrade_locked(engine: Engine, url: str) -> None:
    from filelock import FileLock, Timeout

    path = sqlite_path(url)
    assert path is not None
    lock = FileLock(str(path) + ".migrate.lock")
    try:
        with lock.acquire(timeout=120):
            with engine.connect().execution_options(**WRITE) as conn, conn.begin():
                if current_revision(conn) != SCHEMA_HEAD:  # someone may have won the race
                    upgrade_schema(conn)
    except Timeout as e:
        raise ConflictError(f"another process is upgrading the ledger at {path}") from e


def _pg_upgrade_locked(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
        conn.commit()
        try:
            with conn.begin():
                if current_revision(conn) != SCHEMA_HEAD:  # someone may have won the race
                    upgrade_schema(conn)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
            conn.commit()
