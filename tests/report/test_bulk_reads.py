"""The bulk readers (the report's large reads: run keys joined in pandas, checkpoints from one
pass over events with LEAD in numpy, Arrow through ADBC on PostgreSQL) return the same rows as
the same readers' SQL joins and window functions, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from launcher.ledger import arrow_fetch
from launcher.ledger.readers import RUN_KEYS, read_attempts, read_checkpoints
from launcher.report.periods import Window, parse_window

ALL = (*RUN_KEYS, "region", "run_id", "attempt_id")
WINDOWS = [Window(), parse_window("2026-11-02", "2026-11-03"), parse_window("2026-11-03T01:30:00Z", None)]


def _plain(df: pd.DataFrame, sort: list[str]) -> pd.DataFrame:
    out = pd.DataFrame({c: np.asarray(df[c], dtype=object) for c in sorted(df.columns)})
    out = out.map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else v)
    return out.sort_values(sort, kind="stable").reset_index(drop=True)


def _same(bulk: pd.DataFrame, plain: pd.DataFrame, sort: list[str]) -> None:
    assert len(bulk) == len(plain)
    pd.testing.assert_frame_equal(_plain(bulk, sort), _plain(plain, sort), check_dtype=False)


def _check(led, *, arrow: bool) -> None:
    with led.engine.connect() as conn:
        for window in WINDOWS:
            for keys, detail in ((("experiment",), False), (ALL, False), (ALL, True)):
                bulk = read_attempts(conn, window, keys, detail, with_ids=True, bulk=True)
                plain = read_attempts(conn, window, keys, detail, with_ids=True)
                assert len(plain) >= (3 if window == Window() else 1)
                # the Arrow path gives categoricals (plain objects for per-attempt detail)
                assert isinstance(bulk["run_id"].dtype, pd.CategoricalDtype) == (arrow and not detail)
                _same(bulk, plain, ["attempt_id"])
            for run_ended in (None, True, False):
                bulk = read_checkpoints(conn, window, ALL, 3, 7 * 86400.0, run_ended=run_ended, bulk=True)
                plain = read_checkpoints(conn, window, ALL, 3, 7 * 86400.0, run_ended=run_ended)
                _same(bulk, plain, ["run_id", "at", "size_bytes"])
        every = read_checkpoints(conn, Window(), ALL, 1, 7 * 86400.0, bulk=True)  # LEAD by one
        assert len(every) >= 3 and every["retain_until"].notna().sum() >= 1
        _same(every, read_checkpoints(conn, Window(), ALL, 1, 7 * 86400.0), ["run_id", "at", "size_bytes"])


def test_bulk_reads_equal_sql_reads_on_sqlite(hand_ledger):
    _check(hand_ledger, arrow=False)


@pytest.mark.postgres
def test_bulk_reads_equal_sql_reads_on_postgresql():
    pg = os.environ.get("LAUNCHER_TEST_PG_URL")
    if not pg:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    from tests.ledger.conftest import _pg_schema_url

    from .conftest import build_hand_ledger

    assert arrow_fetch.available("postgresql")  # the report extra's ADBC driver
    gen = _pg_schema_url(pg)
    try:
        led, _ = build_hand_ledger(next(gen))
        try:
            _check(led, arrow=True)
        finally:
            led.close()
    finally:
        gen.close()
