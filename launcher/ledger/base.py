"""The Ledger's connection handling and the helpers its method groups share."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NoReturn, Self

from sqlalchemy import Connection, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from launcher.errors import ProviderError
from launcher.ledger import models as m
from launcher.ledger.engine import WRITE, ensure_schema, make_engine, normalize_url
from launcher.ledger.failures import explain


def utc_now() -> datetime:
    return datetime.now(UTC)


def _as_set(v: str | Collection[str]) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def _reraise(e: BaseException, where: str) -> NoReturn:
    err = explain(e, where)
    if err is None:
        raise e
    raise err from e


class _Joined(threading.local):
    """The connection of the unit of work this thread has open (None: none)."""

    conn: Connection | None = None


class LedgerBase:
    """Engine, clock and transactions. See launcher.ledger.store.Ledger for the API."""

    def __init__(self, url: str | None = None, *, now: Callable[[], datetime] = utc_now) -> None:
        from launcher.paths import db_url

        self._url = normalize_url(url or db_url())
        self._now = now
        self._joined = _Joined()
        try:
            self._engine = make_engine(self._url)
        except OSError as e:
            _reraise(e, self.url)
        self._write_engine = self._engine.execution_options(**WRITE)
        try:
            ensure_schema(self._engine, self._url)
        except (DBAPIError, OSError) as e:
            self._engine.dispose()
            raise (explain(e, self.url) or ProviderError(f"cannot open the ledger at {self.url}")) from e

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return make_url(self._url).render_as_string(hide_password=True)

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine, for read-only bulk queries (e.g. pandas.read_sql)."""
        return self._engine

    def now(self) -> datetime:
        return self._now()

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A unit of work: every ledger read and write this thread makes inside the block joins
        one write transaction (BEGIN IMMEDIATE on SQLite), committed when the block ends and
        rolled back whole when anything in it raises. Reads see the block's own writes. A
        nested block joins the outer one. Keep blocks short and free of slow actions: on
        SQLite every other writer waits for the block."""
        if self._joined.conn is not None:
            yield
            return
        try:
            with self._write_engine.begin() as conn:
                self._check_write(conn)
                self._joined.conn = conn
                try:
                    yield
                finally:
                    self._joined.conn = None
        except (DBAPIError, OSError) as e:
            _reraise(e, self.url)

    def _check_write(self, conn: Connection) -> None:
        """Hook run first in every write transaction (and in each write joining one)."""

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        """A short write transaction (BEGIN IMMEDIATE on SQLite), committed on exit; a failure
        rolls the whole transaction back and is told as a LedgerUnavailableError. Inside
        `transaction()` it is a savepoint of the open transaction: a method's failed write
        undoes only its own rows, so a caller that handles the error can go on."""
        joined = self._joined.conn
        try:
            if joined is not None:
                with joined.begin_nested():
                    self._check_write(joined)
                    yield joined
                return
            with self._write_engine.begin() as conn:
                self._check_write(conn)
                yield conn
        except (DBAPIError, OSError) as e:
            _reraise(e, self.url)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        joined = self._joined.conn
        try:
            if joined is not None:
                yield joined
                return
            with self._engine.connect() as conn:
                yield conn
        except (DBAPIError, OSError) as e:
            _reraise(e, self.url)

    @staticmethod
    def _tags(c: Connection, entity_type: str, ids: list[str]) -> dict[str, dict[str, str]]:
        if not ids:
            return {}
        t = m.tags.c
        q = select(t.entity_id, t.key, t.value).where(t.entity_type == entity_type, t.entity_id.in_(ids))
        out: dict[str, dict[str, str]] = {}
        for entity_id, key, value in c.execute(q):
            out.setdefault(entity_id, {})[key] = value
        return out
