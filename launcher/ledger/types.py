"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.types import Float, TypeDecorator

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit key.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes in, timezone-aware UTC datetimes out.

    PostgreSQL stores timestamptz; SQLite stores naive UTC text (which sorts correctly).
    Naive datetimes are refused: a silent local-time guess is how ledgers go wrong.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the ledger needs timezone-aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class epoch_seconds(FunctionElement[float]):
    """Seconds since 1970-01-01 UTC of a UtcDateTime column, computed by the database (fast bulk
    reads: no per-row datetime objects)."""

    type = Float()
    inherit_cache = True


@compiles(epoch_seconds, "sqlite")
def _epoch_sqlite(element: epoch_seconds, compiler: Any, **kw: Any) -> str:
    # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC): whole seconds from strftime, the fraction
    # from the text, exact to the microsecond (julianday() would lose ~10 us).
    (arg,) = list(element.clauses)
    x = compiler.process(arg, **kw)
    return f"(CAST(strftime('%s', {x}) AS INTEGER) + COALESCE(CAST(substr({x}, 20) AS REAL), 0.0))"


@compiles(epoch_seconds)
def _epoch_default(element: epoch_seconds, compiler: Any, **kw: Any) -> str:
    (arg,) = list(element.clauses)
    return f"CAST(EXTRACT(EPOCH FROM {compiler.process(arg, **kw)}) AS DOUBLE PRECISION)"


def epoch(col: ColumnElement[Any]) -> epoch_seconds:
    return epoch_seconds(col)


class greatest(FunctionElement[float]):
    type = Float()
    inherit_cache = True


class least(FunctionElement[float]):
    type = Float()
    inherit_cache = True


class utc_prefix(FunctionElement[str]):
    """'YYYY-MM-DD' (day) or 'YYYY-MM' (month) of a UtcDateTime column, in UTC."""

    inherit_cache = True

    def __init__(self, col: ColumnElement[Any], unit: str) -> None:
        assert unit in ("day", "month")
        self.unit = unit
        super().__init__(col)


@compiles(greatest, "sqlite")
def _greatest_sqlite(element: greatest, compiler: Any, **kw: Any) -> str:
    return f"max({compiler.process(element.clauses, **kw)})"


@compiles(greatest)
def _greatest_default(element: greatest, compiler: Any, **kw: Any) -> str:
    return f"GREATEST({compiler.process(element.clauses, **kw)})"


@compiles(least, "sqlite")
def _least_sqlite(element: least, compiler: Any, **kw: Any) -> str:
    return f"min({compiler.process(element.clauses, **kw)})"


@compiles(least)
def _least_default(element: least, compiler: Any, **kw: Any) -> str:
    return f"LEAST({compiler.process(element.clauses, **kw)})"


@compiles(utc_prefix, "sqlite")
def _prefix_sqlite(element: utc_prefix, compiler: Any, **kw: Any) -> str:
    (arg,) = list(element.clauses)
    return f"substr({compiler.process(arg, **kw)}, 1, {10 if element.unit == 'day' else 7})"


@compiles(utc_prefix)
def _prefix_default(element: utc_prefix, compiler: Any, **kw: Any) -> str:
    (arg,) = list(element.clauses)
    fmt = "YYYY-MM-DD" if element.unit == "day" else "YYYY-MM"
    return f"to_char({compiler.process(arg, **kw)} AT TIME ZONE 'UTC', '{fmt}')"
