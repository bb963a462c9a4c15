"""Bulk SELECTs on PostgreSQL through Arrow Database Connectivity (ADBC, the Apache Arrow
project's libpq driver): the server's binary COPY output fills Arrow columns in C, with no
Python object per value (a million attempts read in a fraction of what psycopg's tuples cost).

Used by the bulk readers for report-sized reads. `fetch_table` returns None when the driver is
not installed (the `report` extra) or the read fails, and the caller reads through SQLAlchemy.
Not for SQLite: a second SQLite library in the process shares the sqlite3 module's POSIX locks
(SQLite's "how to corrupt" list), and ADBC's missed commits still in the WAL when tried.

The statement is compiled with its values inlined (our own datetimes, numbers and ids, quoted by
SQLAlchemy's literal renderers), so the SQL text does not depend on a driver's parameter style.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

log = logging.getLogger(__name__)

_DRIVERS = {"postgresql": "adbc_driver_postgresql"}


def available(dialect_name: str) -> bool:
    module = _DRIVERS.get(dialect_name)
    return module is not None and importlib.util.find_spec(module) is not None


def fetch_table(conn: Any, stmt: Any) -> Any | None:
    """The rows of `stmt` as a pyarrow Table, or None (read it the ordinary way).

    Reads on a connection of its own: it sees what is committed now, not the caller's
    transaction (callers that combine reads allow for that)."""
    if not available(conn.dialect.name):
        return None
    import adbc_driver_manager
    import adbc_driver_postgresql.dbapi as driver

    sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    uri = conn.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with driver.connect(uri) as adbc, adbc.cursor() as cur:
            # the planner's cost of the (never run) per-attempt lookups triggers JIT, whose
            # compilation took longer than the read itself
            cur.execute("SET jit = off")
            cur.execute(sql)
            return cur.fetch_arrow_table()
    except (adbc_driver_manager.Error, OSError) as e:  # e.g. a URL option libpq does not know
        log.debug("ADBC read failed, reading through SQLAlchemy: %s", type(e).__name__)
        return None
