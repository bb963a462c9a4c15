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

import numpy as np
import pandas as pd
from sqlalchemy import func, select, union

from launcher.atomic import atomic_write_bytes, atomic_write_text
from launcher.ledger import models as m
from launcher.ledger.readers import EVENT_KINDS, RUN_KEYS, read_attempts, read_checkpoints
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
    def _meta(self) -> dict[str, Any] | None:
        try:
            meta = json.loads((self.dir / "meta.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or {k: meta.get(k) for k in self.settings} != self.settings:
            return None
        return meta

    def _read(self, meta: dict[str, Any], columns: tuple[list[str] | None, list[str] | None] = (None, None)):
        try:
            gen = meta["generation"]
            attempts = pd.read_parquet(self.dir / f"attempts-{gen}.parquet", columns=columns[0])
            checkpoints = pd.read_parquet(self.dir / f"checkpoints-{gen}.parquet", columns=columns[1])
        except (OSError, ValueError, KeyError):
            return None
        return attempts, checkpoints

    def _write(self, meta: dict[str, Any], attempts: pd.DataFrame, checkpoints: pd.DataFrame) -> None:
        import io

        self.dir.mkdir(parents=True, exist_ok=True)
        gen = f"{int(time.time() * 1000)}-{os.getpid()}"
        meta = {**meta, **self.settings, "generation": gen}
        for name, df in (("attempts", attempts), ("checkpoints", checkpoints)):
            df = df.reset_index(drop=True)
            for c in df.columns:  # dictionary-encoded strings: small files, fast reads and groupings
                if df[c].dtype.kind not in "fbiu":
                    df[c] = df[c].astype("category")
            buf = io.BytesIO()
            df.to_parquet(buf, index=False)
            atomic_write_bytes(self.dir / f"{name}-{gen}.parquet", buf.getvalue())
        atomic_write_text(self.dir / "meta.json", json.dumps(meta))
        for old in self.dir.glob("*.parquet"):
            if gen not in old.name:
                old.unlink(missing_ok=True)

    # ---- refresh --------------------------------------------------------------------------
    def frames(
        self, ledger: Any, attempt_columns: list[str] | None = None, checkpoint_columns: list[str] | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Every attempt (with facts) and every sized checkpoint, up to date. The column lists
        name what the caller needs (read alone when the cached part did not change); None: all.

        The files hold ended attempts and the checkpoints of ended runs, which change only
        through new events; open attempts and running runs' checkpoints are read fresh."""
        t0 = time.perf_counter()
        a, e, r = m.attempts.c, m.events.c, m.runs.c
        refreshed_at = datetime.now(UTC)  # read before the data: a later change is seen next time
        meta = self._meta()
        keep, ret = int(self.settings["keep_last"]), float(self.settings["retention_s"])
        with ledger.engine.connect() as conn:
            max_id = int(conn.execute(select(func.coalesce(func.max(e.id), 0))).scalar_one())
            count = int(conn.execute(select(func.count()).select_from(m.attempts)).scalar_one())
            open_list = sorted(conn.execute(select(a.attempt_id).where(a.ended_at.is_(None))).scalars())
            if len(open_list) > MAX_IN_LIST:  # unusual: read them with the full event pass
                open_attempts = read_attempts(
                    conn, Window(), ALL_KEYS, False, with_ids=True, where=a.ended_at.is_(None), bulk=True
                )
            else:  # (an empty IN list would still make SQLite walk every event of those kinds)
                open_attempts = read_attempts(conn, Window(), ALL_KEYS, False, with_ids=True, only_ids=open_list or ["-"])
            open_ids = set(open_attempts["attempt_id"])
            open_run_ids = set(conn.execute(select(r.run_id).where(r.ended_at.is_(None))).scalars())
            # by run id: the events (run_id, id) index finds them without a pass over all checkpoints
            if len(open_run_ids) <= MAX_IN_LIST:
                open_ck = read_checkpoints(conn, Window(), ALL_KEYS, keep, ret, runs=sorted(open_run_ids))
            else:
                open_ck = read_checkpoints(conn, Window(), ALL_KEYS, keep, ret, where=r.ended_at.is_(None))
            new_meta = {
                "max_event_id": max_id, "refreshed_at": refreshed_at.isoformat(),
                "open_attempt_ids": sorted(open_ids), "open_runs": sorted(open_run_ids),
            }  # fmt: skip
            if meta is not None and max_id >= meta["max_event_id"]:
                since = datetime.fromisoformat(meta["refreshed_at"]) - MARGIN
                from_id = meta["max_event_id"] - MARGIN_EVENT_IDS.get(conn.dialect.name, DEFAULT_MARGIN_EVENT_IDS)
                touched = union(
                    select(a.attempt_id).where(a.started_at >= since),
                    select(e.attempt_id).where(e.id > from_id, e.kind.in_(EVENT_KINDS), e.attempt_id.is_not(None)),
                )
                # ended attempts that are new to the files: open last time, started since, or with new events
                ids = (set(conn.execute(touched).scalars()) | set(meta["open_attempt_ids"])) - open_ids
                ck_runs = set(conn.execute(select(e.run_id).where(e.id > from_id, e.kind == "checkpoint")).scalars())
                ck_runs = (ck_runs | set(meta["open_runs"])) - open_run_ids
                if len(ids) <= MAX_IN_LIST and len(ck_runs) <= MAX_IN_LIST:
                    cols = (attempt_columns, checkpoint_columns) if not ids and not ck_runs else (None, None)
                    frames = self._read(meta, cols)
                    if frames is not None:
                        attempts, checkpoints = frames
                        mode = "unchanged"
                        if ids or ck_runs:
                            fresh = self._fresh(conn, sorted(ids), ck_runs, keep, ret)
                            # re-read but equal to the cached rows (PostgreSQL's id margin re-reads
                            # the recent events' attempts every time): keep the files instead of
                            # rewriting a million rows
                            if not _matches(frames, fresh, ids, ck_runs):
                                attempts, checkpoints = _merge(frames, fresh, ids, ck_runs)
                                mode = "incremental"
                        if len(attempts) + len(open_attempts) == count:  # else e.g. a backfilled attempt
                            if mode == "incremental":
                                self._write({**new_meta, "attempts": len(attempts)}, attempts, checkpoints)
                            else:
                                self._touch(meta, new_meta)
                            self.stats = CacheStats(mode, len(ids), len(ck_runs), time.perf_counter() - t0)
                            return _with_open(attempts, open_attempts, checkpoints, open_ck)
            # bulk reads see what is committed now: what ended since the open lists were read
            # stays with the open ones (recorded as open, so the next refresh reads it again)
            attempts = read_attempts(conn, Window(), ALL_KEYS, False, with_ids=True, where=a.ended_at.is_not(None), bulk=True)
            attempts = attempts[~attempts["attempt_id"].isin(open_ids)].reset_index(drop=True)
            checkpoints = read_checkpoints(
                conn, Window(), ALL_KEYS, keep, ret, run_ended=True, bulk=True, attempts=attempts
            )
            checkpoints = checkpoints[~checkpoints["run_id"].isin(open_run_ids)].reset_index(drop=True)
        self._write({**new_meta, "attempts": len(attempts)}, attempts, checkpoints)
        self.stats = CacheStats("full", len(attempts), -1, time.perf_counter() - t0)
        return _with_open(attempts, open_attempts, checkpoints, open_ck)

    def _touch(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Nothing cached changed: only record what was open now (the files stay)."""
        atomic_write_text(self.dir / "meta.json", json.dumps({**old, **new, "refreshed_at": old["refreshed_at"]}))

    @staticmethod
    def _fresh(
        conn: Any, ids: list[str], ck_runs: set[str], keep: int, ret: float
    ) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
        """These attempts and these runs' checkpoints, read from the ledger again."""
        attempts = read_attempts(conn, Window(), ALL_KEYS, False, with_ids=True, only_ids=ids) if ids else None
        checkpoints = read_checkpoints(conn, Window(), ALL_KEYS, keep, ret, runs=sorted(ck_runs)) if ck_runs else None
        return attempts, checkpoints

def _matches(
    frames: tuple[pd.DataFrame, pd.DataFrame],
    fresh: tuple[pd.DataFrame | None, pd.DataFrame | None],
    ids: set[str],
    ck_runs: set[str],
) -> bool:
    """Whether the cached frames already hold exactly the fresh rows."""
    attempts, checkpoints = frames
    if fresh[0] is not None:
        if not _same_rows(attempts[attempts["attempt_id"].isin(ids).to_numpy()], fresh[0], ["attempt_id"]):
            return False
    if fresh[1] is not None:
        mine = checkpoints[checkpoints["run_id"].isin(ck_runs).to_numpy()]
        if not _same_rows(mine, fresh[1], ["run_id", "at", "size_bytes"]):
            return False
    return True


def _merge(
    frames: tuple[pd.DataFrame, pd.DataFrame],
    fresh: tuple[pd.DataFrame | None, pd.DataFrame | None],
    ids: set[str],
    ck_runs: set[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cached frames with these attempts' and runs' rows replaced by the fresh ones."""
    attempts, checkpoints = frames
    if fresh[0] is not None:
        attempts = _concat(attempts[~attempts["attempt_id"].isin(ids).to_numpy()], fresh[0])
    if fresh[1] is not None:
        checkpoints = _concat(checkpoints[~checkpoints["run_id"].isin(ck_runs).to_numpy()], fresh[1])
    return attempts, checkpoints


def _same_rows(cached: pd.DataFrame, fresh: pd.DataFrame, order: list[str]) -> bool:
    """Whether the cached rows equal the fresh ones (as plain values, in the same order)."""
    if len(cached) != len(fresh) or set(cached.columns) != set(fresh.columns):
        return False
    cols = list(cached.columns)

    def plain(df: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame({c: pd.Series(np.asarray(df[c], dtype=object), dtype=object) for c in cols})
        out = out.where(out.notna(), None)
        return out.sort_values(order, kind="stable").reset_index(drop=True)

    return plain(cached).equals(plain(fresh))


def _with_open(
    attempts: pd.DataFrame, open_attempts: pd.DataFrame, checkpoints: pd.DataFrame, open_ck: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _concat(attempts, open_attempts), _concat(checkpoints, open_ck)


def _concat(cached: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """Cached rows (string columns categorical) + fresh rows, keeping columns categorical
    (union of categories: no per-row conversion of a million cached strings)."""
    from pandas.api.types import union_categoricals

    if fresh.empty:
        return cached.reset_index(drop=True)
    cached = cached.reset_index(drop=True)
    out = {}
    for c in cached.columns:
        col = cached[c]
        add = fresh[c] if c in fresh else pd.Series([None] * len(fresh))
        if isinstance(col.dtype, pd.CategoricalDtype):
            new = pd.Categorical(np.array(add.astype(object).where(add.notna(), None), dtype=object))
            out[c] = union_categoricals([_object_categories(col.array), _object_categories(new)], ignore_order=True)
        else:
            out[c] = np.concatenate([col.to_numpy(), add.to_numpy(dtype=col.dtype)])
    return pd.DataFrame(out)


def _object_categories(cat: pd.Categorical) -> pd.Categorical:
    """Same codes, categories as plain objects (parquet gives arrow strings; unions need one dtype)."""
    cats = pd.Index(np.asarray(cat.categories, dtype=object), dtype=object)
    return pd.Categorical.from_codes(cat.codes, categories=cats)


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
