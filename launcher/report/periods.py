"""Report windows: --since/--until/--month parsed into a half-open UTC interval [since, until).

Dates (YYYY-MM-DD) mean whole UTC days, and --until with a date includes that day; times are
ISO-8601 (UTC unless they carry an offset). --month YYYY-MM is that calendar month.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from launcher.cost.window import Window
from launcher.errors import BadInputError

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")


def month_window(month: str) -> Window:
    m = _MONTH_RE.match(month.strip())
    if not m or not 1 <= int(m.group(2)) <= 12:
        raise BadInputError(f"malformed month {month!r}", hint="use YYYY-MM, e.g. 2026-11")
    return Window.month(int(m.group(1)), int(m.group(2)))


def parse_time(value: str, *, flag: str, end_of_day: bool = False) -> datetime:
    """A date or ISO-8601 time as an aware UTC datetime; BadInputError naming the flag."""
    text = value.strip()
    if _DATE_RE.match(text):
        try:
            d = date.fromisoformat(text)
        except ValueError as e:
            raise BadInputError(f"malformed date for {flag}: {value!r} ({e})", hint="use YYYY-MM-DD") from e
        start = datetime(d.year, d.month, d.day, tzinfo=UTC)
        return start + timedelta(days=1) if end_of_day else start
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise BadInputError(
            f"malformed date for {flag}: {value!r}",
            hint="use YYYY-MM-DD or an ISO-8601 time such as 2026-11-03T12:00:00Z",
        ) from e
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def parse_window(since: str | None = None, until: str | None = None, month: str | None = None) -> Window:
    """Validate the report flags into a Window (bad input raises BadInputError)."""
    if month is not None:
        if since is not None or until is not None:
            raise BadInputError("--month cannot be combined with --since/--until")
        return month_window(month)
    s = parse_time(since, flag="--since") if since is not None else None
    u = parse_time(until, flag="--until", end_of_day=True) if until is not None else None
    if s is not None and u is not None and s >= u:
        raise BadInputError(
            f"empty date range: --since {since} is not before --until {until}",
            hint="--since must come before --until (--until with a date includes that day)",
        )
    return Window(s, u)
