"""What a report reads: the ledger's bulk readers (launcher.ledger.readers) over a window, or
the incremental report cache (cache.py) that holds the same frames."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from launcher.ledger.readers import read_attempts, read_checkpoints, read_prices, read_run_tags
from launcher.cost.storage import CHECKPOINT_KEEP_LAST, CHECKPOINT_RETENTION_AFTER_RUN_S
from launcher.ledger.attempt_cost import EventFacts
from launcher.report.data import KEY_SOURCES, LedgerData
from launcher.report.periods import Window

def load_ledger_data(
    ledger: Any,
    window: Window,
    *,
    keys: Sequence[str] = KEY_SOURCES,
    with_tags: bool = False,
    checkpoint_keep_last: int = CHECKPOINT_KEEP_LAST,
    retention_s: float = CHECKPOINT_RETENTION_AFTER_RUN_S,
    now: datetime | None = None,
    timings: dict[str, float] | None = None,
    use_cache: bool = False,
) -> LedgerData:
    """Attempts overlapping the window with their run's `keys` and per-attempt event facts,
    plus checkpoint and price rows. `timings`, when given, receives seconds per phase.
    `use_cache`: read through the incremental report cache (see cache.py; not with tags)."""
    as_of = (now or ledger.now()).timestamp()
    detail = "attempt_id" in keys or with_tags
    if use_cache and not with_tags and _have_pyarrow():
        return _load_cached(ledger, window, keys, checkpoint_keep_last, retention_s, as_of, timings)
    t0 = time.perf_counter()
    with ledger.engine.connect() as conn:
        attempts = read_attempts(conn, window, keys, detail, bulk=True)
        t1 = time.perf_counter()
        checkpoints = read_checkpoints(conn, window, keys, checkpoint_keep_last, retention_s, bulk=True)
        prices = read_prices(conn)
        t2 = time.perf_counter()
        if with_tags:
            attempts["tags"] = read_run_tags(conn, attempts["run_id"])
    if timings is not None:
        timings["sql_attempts_s"] = t1 - t0
        timings["sql_events_s"] = t2 - t1
    return LedgerData(attempts=attempts, facts=EventFacts(checkpoints=checkpoints, prices=prices), as_of=as_of)


def _have_pyarrow() -> bool:
    """The cache is parquet; without pyarrow (the `report` extra) reports read the ledger."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


ATTEMPT_NUMERIC = (
    "seq", "num_nodes", "accelerator_count", "price_usd_per_hour", "on_demand_price_usd_per_hour",
    "billed_seconds", "started_at", "ended_at", "preempted", "teardown_at", "last_ckpt_at", "resume_at",
    "overhead_s",
)  # fmt: skip
CHECKPOINT_NUMERIC = ("at", "retain_until", "size_bytes", "run_ended_at")


def _load_cached(
    ledger: Any,
    window: Window,
    keys: Sequence[str],
    keep_last: int,
    retention_s: float,
    as_of: float,
    timings: dict[str, float] | None,
) -> LedgerData:
    from launcher.report.cache import ReportCache, default_cache_dir, window_attempts, window_checkpoints

    t0 = time.perf_counter()
    with ledger.engine.connect() as conn:
        prices = read_prices(conn)
    key_cols = [k for k in dict.fromkeys(keys) if k not in ("run_id", "cloud", "attempt_id")]
    need_ids = "attempt_id" in keys or len(prices) > 0
    attempt_cols = [*ATTEMPT_NUMERIC, "run_id", "cloud", *key_cols, *(["attempt_id"] if need_ids else [])]
    ck_cols = [*CHECKPOINT_NUMERIC, "cloud", *[k for k in dict.fromkeys(keys) if k != "cloud"]]
    cache = ReportCache(default_cache_dir(ledger.url), keep_last=keep_last, retention_s=retention_s)
    t1 = time.perf_counter()
    all_attempts, all_checkpoints = cache.frames(ledger, attempt_cols, ck_cols)
    t2 = time.perf_counter()
    attempts = window_attempts(all_attempts[attempt_cols], window)
    checkpoints = window_checkpoints(all_checkpoints[ck_cols], window, retention_s)
    if "attempt_id" not in attempts:
        attempts["attempt_id"] = None
    if timings is not None:
        timings["cache_refresh_s"] = t2 - t1
        timings["sql_prices_s"] = t1 - t0
    return LedgerData(attempts=attempts, facts=EventFacts(checkpoints=checkpoints, prices=prices), as_of=as_of)


