"""Time windows: a half-open UTC interval [since, until), and UTC calendar months.

Reports (--since/--until/--month), budgets (this month's spend), the spend of a window and the
cost rollup's month rows all take their windows and month starts from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Window:
    """[since, until) in UTC; either end may be open (None)."""

    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def month(cls, year: int, month: int) -> Window:
        """That UTC calendar month."""
        start = datetime(year, month, 1, tzinfo=UTC)
        return cls(start, datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC))

    @classmethod
    def month_to(cls, now: datetime) -> Window:
        """From the start of `now`'s UTC month up to `now` (a budget's spend so far)."""
        return cls(month_start(now), now)

    def label(self) -> str:
        s = self.since.isoformat() if self.since else "beginning"
        u = self.until.isoformat() if self.until else "now"
        return f"{s} .. {u}"

    def bounds_s(self, *, first_s: float, last_s: float) -> tuple[float, float]:
        """Epoch seconds [lo, hi), open ends closed at `first_s` / `last_s` (hi never below lo)."""
        lo = self.since.timestamp() if self.since is not None else first_s
        hi = self.until.timestamp() if self.until is not None else last_s
        return lo, max(hi, lo)


def month_start(t: datetime) -> datetime:
    """The start of `t`'s UTC calendar month."""
    return t.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_start_s(t: float) -> float:
    """The same in epoch seconds."""
    return month_start(datetime.fromtimestamp(t, UTC)).timestamp()


def next_month_s(m0: float) -> float:
    """The start of the UTC month after the one starting at epoch second `m0`."""
    d = datetime.fromtimestamp(m0, UTC)
    return Window.month(d.year, d.month).until.timestamp()  # type: ignore[union-attr]


def month_spans_s(start: float, end: float) -> list[tuple[float, float]]:
    """(start, end) of each UTC month [start, end) overlaps; a zero-length interval: its start's."""
    m0 = month_start_s(start)
    if end <= start:
        return [(m0, next_month_s(m0))]
    out = []
    while m0 < end:
        m1 = next_month_s(m0)
        out.append((m0, m1))
        m0 = m1
    return out
