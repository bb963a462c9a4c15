"""The one Window type and the UTC month arithmetic every part counts cost with."""

from datetime import UTC, datetime, timedelta, timezone

from launcher.cost.window import Window, month_spans_s, month_start, month_start_s, next_month_s
from launcher.report.periods import month_window, parse_window


def ts(*a) -> float:
    return datetime(*a, tzinfo=UTC).timestamp()


def test_month_windows_and_starts():
    assert Window.month(2026, 12) == Window(datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert month_window("2026-11") == Window.month(2026, 11)
    assert parse_window(month="2026-02").until == datetime(2026, 3, 1, tzinfo=UTC)
    # a time in another zone counts in its UTC month
    late = datetime(2026, 12, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))  # 2026-11-30 22:30 UTC
    assert month_start(late) == datetime(2026, 11, 1, tzinfo=UTC)
    assert Window.month_to(late) == Window(datetime(2026, 11, 1, tzinfo=UTC), late)
    assert month_start_s(ts(2026, 11, 30, 23)) == ts(2026, 11, 1) and next_month_s(ts(2026, 12, 1)) == ts(2027, 1, 1)


def test_month_spans_split_at_month_starts():
    assert month_spans_s(ts(2026, 11, 30, 12), ts(2027, 1, 2)) == [
        (ts(2026, 11, 1), ts(2026, 12, 1)), (ts(2026, 12, 1), ts(2027, 1, 1)), (ts(2027, 1, 1), ts(2027, 2, 1)),
    ]  # fmt: skip
    assert month_spans_s(ts(2026, 11, 5), ts(2026, 11, 5)) == [(ts(2026, 11, 1), ts(2026, 12, 1))]  # zero length
    assert month_spans_s(ts(2026, 11, 5), ts(2026, 12, 1)) == [(ts(2026, 11, 1), ts(2026, 12, 1))]  # end excluded


def test_bounds_close_open_ends():
    w = Window(until=datetime(2026, 11, 2, tzinfo=UTC))
    assert w.bounds_s(first_s=ts(2026, 11, 1), last_s=ts(2026, 12, 1)) == (ts(2026, 11, 1), ts(2026, 11, 2))
    assert Window().bounds_s(first_s=5.0, last_s=3.0) == (5.0, 5.0)  # never an inverted window
