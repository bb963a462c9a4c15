"""A local, incremental copy of what reports read (the report rollup), so a report over a large
ledger does not re-read every attempt and event each time.

Holds every attempt with its event facts and every sized checkpoint (the loader's frames over
all time, with all grouping keys), in parquet files under `$LAUNCHER_HOME/cache/report/<ledger
hash>/`. A refresh re-reads only what can have changed since the last one:
- attempts that were open at the last refresh (only open attempts change: end_attempt is a
  compare-and-set on open ones), that started since then (minus a margin), or that got events
  of the kinds reports use (events are append-only: ids above the last seen, minus a margin for
  PostgreSQL transactions that commit out of id order);
- the checkpoints of runs that were running, or that got checkpoint events (LEAD is per run).
Safety nets: a ledger whose attempt count differs from the merged copy, whose newest event id
went backwards, or whose schema/settings changed is re-read in full. Writes are atomic (new
generation files, then the meta file that names them), so a crash or a concurrent report
leaves a readable cache or none; any unreadable cache is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import func, select, union

from launcher.atomic import atomic_write_bytes, atomic_write_text
from launcher.ledger import models as m
from launcher.report.load import EVENT_KINDS, RUN_KEYS, _attempts, _checkpoints
from launcher.report.periods import Window

CACHE_VERSION = 1
MARGIN = timedelta(minutes=10)
# SQLite has one writer at a time, so event ids become visible in order; PostgreSQL sequences
# do not promise that, so recent ids are read again (harmless: facts are max/min).
MARGIN_EVENT_IDS = {"sqlite": 0}
DEFAULT_MARGIN_EVENT_IDS = 1_000
MAX_IN_LIST = 5_000  # open attempts/runs re-read by id; more means a full read
ALL_KEYS = (*RUN_KEYS, "region", "run_id", "attempt_id")


def default_cache_dir(ledger_url: str) -> Path:
    from launcher.paths import home

    digest = hashlib.sha256(ledger_url.encode()).hexdigest()[:16]
    return home() / "cache" / "report" / digest


@dataclass
class CacheStats:
    mode: str = "none"  # full | incremental | unchanged
    refreshed_attempts: int = 0
    refreshed_checkpoint_runs: int = 0
    seconds: float = 0.0


class ReportCache:
    def __init__(self, directory: Path, *, keep_last: int, retention_s: float) -> None:
        self.dir = directory
        self.settings = {"version": CACHE_VERSION, "keep_last": keep_last, "retention_s": retention_s}
        self.stats = CacheStats()

    # ---- files ----------------------------------------------------------------------------
    def _read(self) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame] | None:
        try:
            meta = json.loads((self.dir / "meta.json").read_text())
            if {k: meta.get(k) for k in self.settings} != self.settings:
                return None
            gen = meta["generation"]
            attempts = pd.read_parquet(self.dir / f"attempts-{gen}.parquet")
            checkpoints = pd.read_parquet(self.dir / f"checkpoints-{gen}.parquet")
        except (OSError, ValueError, KeyError):
            return None
        return meta, attempts, checkpoints

    def _write(self, meta: dict[str, Any], attempts: pd.DataFrame, checkpoints: pd.DataFrame) -> None:
        import io

        self.dir.mkdir(parents=True, exist_ok=True)
        gen = f"{int(time.time() * 1000)}-{os.getpid()}"
        for name, df in (("attempts", attempts), ("checkpoints", checkpoints)):
            buf = io.BytesIO()
            df.reset_index(drop=True).to_parquet(buf, index=False)
            atomic_write_bytes(self.dir / f"{name}-{gen}.parquet", buf.getvalue())
        atomic_write_text(self.dir / "meta.json", json.dumps({**meta, **self.settings, "generation": gen}))
        for old in self.dir.glob("*.parquet"):
            if gen not in old.name:
                old.unlink(missing_ok=True)

    # ---- refresh --------------------------------------------------------------------------
    def _incremental(
        self, conn: Any, old: dict[str, Any], attempts: pd.DataFrame, checkpoints: pd.DataFrame,
        keep: int, ret: float, count: int, max_id: int,
    ) -> tuple[pd.DataFrame, pd.DataFrame, bool] | None:  # fmt: skip
        """Re-read what can have changed: (attempts, checkpoints, changed?), or None when a full
        read is needed."""
        a, e = m.attempts.c, m.events.c
        # only open attempts change (end_attempt is compare-and-set on open ones)
        open_ids = attempts.loc[attempts["ended_at"].isna(), "attempt_id"].tolist()
        open_runs = sorted(set(checkpoints.loc[checkpoints["run_ended_at"].isna(), "run_id"]))
        since = datetime.fromisoformat(old["refreshed_at"]) - MARGIN
        from_id = old["max_event_id"] - MARGIN_EVENT_IDS.get(conn.dialect.name, DEFAULT_MARGIN_EVENT_IDS)
        ids_q = union(
            select(a.attempt_id).where(a.started_at >= since),
            select(e.attempt_id).where(e.id > from_id, e.kind.in_(EVENT_KINDS), e.attempt_id.is_not(None)),
        )
        ids = sorted(set(conn.execute(ids_q).scalars()) | set(open_ids))
        ck_runs = set(conn.execute(select(e.run_id).where(e.id > from_id, e.kind == "checkpoint")).scalars())
        ck_runs |= set(open_runs)
        if len(ids) > MAX_IN_LIST or len(ck_runs) > MAX_IN_LIST:
            return None
        if not ids and not ck_runs and count == len(attempts) and max_id == old["max_event_id"]:
            self.stats = CacheStats("unchanged")
            return attempts, checkpoints, False
        changed = _attempts(conn, Window(), ALL_KEYS, False, with_ids=True, only_ids=ids) if ids else attempts.iloc[:0]
        attempts = pd.concat([attempts[~attempts["attempt_id"].isin(ids)], changed], ignore_index=True)
        if len(attempts) != count:  # e.g. an attempt added with an old start time
            return None
        ck_new = _checkpoints(conn, Window(), ALL_KEYS, keep, ret, where=e.run_id.in_(sorted(ck_runs)))
        checkpoints = pd.concat([checkpoints[~checkpoints["run_id"].isin(ck_runs)], ck_new], ignore_index=True)
        self.stats = CacheStats("incremental", len(changed), len(ck_runs))
        return attempts, checkpoints, True

    def frames(self, ledger: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Every attempt (with facts and all keys) and every sized checkpoint, up to date."""
        t0 = time.perf_counter()
        e = m.events.c
        refreshed_at = datetime.now(UTC)  # read before the data: a later change is seen next time
        cached = self._read()
        keep, ret = int(self.settings["keep_last"]), float(self.settings["retention_s"])
        with ledger.engine.connect() as conn:
            max_id = conn.execute(select(func.coalesce(func.max(e.id), 0))).scalar_one()
            count = conn.execute(select(func.count()).select_from(m.attempts)).scalar_one()
            meta = {"max_event_id": int(max_id), "refreshed_at": refreshed_at.isoformat()}
            changed = True
            if cached is not None and int(max_id) >= cached[0]["max_event_id"]:
                old_meta, attempts, checkpoints = cached
                refreshed = self._incremental(conn, old_meta, attempts, checkpoints, keep, ret, count, int(max_id))
                if refreshed is None:
                    cached = None
                else:
                    attempts, checkpoints, changed = refreshed
            else:
                cached = None
            if cached is None:
                attempts = _attempts(conn, Window(), ALL_KEYS, False, with_ids=True)
                checkpoints = _checkpoints(conn, Window(), ALL_KEYS, keep, ret)
                self.stats = CacheStats("full", len(attempts), -1)
        if changed:
            self._write(meta, attempts, checkpoints)
        self.stats.seconds = time.perf_counter() - t0
        return attempts, checkpoints


def window_attempts(attempts: pd.DataFrame, window: Window) -> pd.DataFrame:
    """The cached attempts the loader's SQL window filter would return."""
    keep = pd.Series(True, index=attempts.index)
    start = attempts["started_at"]
    if window.until is not None:
        keep &= start < window.until.timestamp()
    if window.since is not None:
        s = window.since.timestamp()
        ended = attempts["ended_at"]
        keep &= ended.isna() | (ended >= s) | (start + attempts["billed_seconds"].fillna(0.0) >= s)
    return attempts[keep.to_numpy()].reset_index(drop=True)


def window_checkpoints(checkpoints: pd.DataFrame, window: Window, retention_s: float) -> pd.DataFrame:
    keep = pd.Series(True, index=checkpoints.index)
    if window.until is not None:
        keep &= checkpoints["at"] < window.until.timestamp()
    if window.since is not None:
        ended = checkpoints["run_ended_at"]
        keep &= ended.isna() | (ended + retention_s >= window.since.timestamp())
    return checkpoints[keep.to_numpy()].reset_index(drop=True)
