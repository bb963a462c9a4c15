"""Benchmark: `launcher report --by experiment --format csv` over a 1,000,000-attempt ledger.

    .venv/bin/python bench/bench_report.py [--attempts 1000000] [--repeat 3] [--rebuild]
        [--by-day] [--attempt-index] [--incremental N] [--pg URL] [--pg-only]

Builds (once; cached under .bench/, which git ignores) a SQLite ledger at schema head with
250,000 runs x 4 attempts over 90 days (20 projects, 2,000 experiments, 50 owners; 30% of spot
attempts preempted; events: a state_change per attempt start, a recovery event after each
preemption, a checkpoint on half the attempts, a teardown per completed attempt: ~2.5 M; and what
the ledger writes as attempts and runs end: per-attempt cost facts and the runs' cost rollup,
here through the bulk backfill an upgraded ledger gets), then times the report in process and
end to end (the real CLI in a subprocess, stdout to /dev/null): reading every attempt
(--no-cache; the peer: what every report did before the rollup), and the CLI's own path (the
ledger's cost rollup) cold (a fresh process, nothing cached) and warm. Target: cold < 3 s.

--pg URL also copies the same ledger into a PostgreSQL schema of its own (`bench_report_N`,
kept for the next run; COPY, then the sequences) and times the same reports there. Target: 5 s.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BENCH_DIR = REPO / ".bench"
TARGET_S = 3.0
TARGET_PG_S = 5.0
LAYOUT_VERSION = 7
START = datetime(2026, 8, 1, tzinfo=UTC).timestamp()  # all in the past: nothing "started since"


def _ts(epoch: np.ndarray) -> list[str]:
    """Epoch seconds -> the ledger's SQLite text format 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC)."""
    us = np.round(epoch * 1e6).astype("int64").astype("datetime64[us]")
    return [s.replace("T", " ") for s in np.datetime_as_string(us, unit="us")]


def build(path: Path, n_attempts: int, seed: int = 7) -> None:
    from launcher.ledger import Ledger

    tmp = path.with_suffix(".building")
    for p in (tmp, Path(str(tmp) + "-wal"), Path(str(tmp) + "-shm")):
        p.unlink(missing_ok=True)
    Ledger(f"sqlite:///{tmp}").close()  # schema at head, via the ledger's own migrations
    rng = np.random.default_rng(seed)
    per_run = 4
    n_runs = n_attempts // per_run
    n = n_runs * per_run
    run_idx = np.repeat(np.arange(n_runs), per_run)
    seq = np.tile(np.arange(1, per_run + 1), n_runs)
    run_start = START + rng.uniform(0, 90 * 86400, n_runs)
    dur = rng.uniform(0.25, 8.0, n) * 3600
    offs = np.cumsum(dur.reshape(n_runs, per_run), axis=1) - dur.reshape(n_runs, per_run)
    started = run_start[run_idx] + offs.ravel()
    ended = started + dur
    spot = rng.random(n) < 0.7
    preempted = spot & (seq < per_run) & (rng.random(n) < 0.3)
    reason = np.where(preempted, "preempted", "completed")
    idle = np.where(preempted, 0.0, rng.uniform(0, 600, n))
    billed = dur + idle
    price_od = rng.choice([1.006, 3.06, 12.24, 32.77], n)
    price = np.where(spot, price_od * rng.uniform(0.3, 0.5, n), price_od)
    nodes = rng.choice([1, 1, 1, 2, 4], n)
    gpus = rng.choice([1, 4, 8], n)
    projects = [f"proj-{i:02d}" for i in range(20)]
    experiments = [f"exp-{i:04d}" for i in range(2000)]
    owners = [f"user{i:02d}" for i in range(50)]
    run_ids = [f"r-bench-{i:07d}" for i in range(n_runs)]
    attempt_ids = [f"{run_ids[r]}-a{s}" for r, s in zip(run_idx.tolist(), seq.tolist())]
    run_exp = rng.integers(0, 2000, n_runs)
    run_ts = _ts(run_start)
    st_ts, en_ts = _ts(started), _ts(ended)

    con = sqlite3.connect(tmp)
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA foreign_keys = OFF")
    with con:
        con.executemany(
            "INSERT INTO runs (run_id, name, spec_hash, spec_yaml, state, project, experiment, owner, cost_center,"
            " created_at, updated_at, ended_at, end_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                (run_ids[i], f"job-{i}", "0" * 64, "run: train", "succeeded", projects[run_exp[i] % 20],
                 experiments[run_exp[i]], owners[i % 50], f"cc-{run_exp[i] % 10}", run_ts[i], run_ts[i],
                 en_ts[i * per_run + per_run - 1], "completed")
                for i in range(n_runs)
            ),
        )  # fmt: skip
        con.executemany(
            "INSERT INTO attempts (attempt_id, run_id, seq, cloud, region, zone, instance_type, accelerator,"
            " accelerator_count, num_nodes, spot, price_usd_per_hour, on_demand_price_usd_per_hour, cluster,"
            " state, started_at, ended_at, end_reason, exit_code, billed_seconds)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                (attempt_ids[i], run_ids[run_idx[i]], int(seq[i]), "aws" if i % 3 else "gcp", "us-east-1", None,
                 "g5.xlarge", "A10G", int(gpus[i]), int(nodes[i]), bool(spot[i]), float(price[i]),
                 float(price_od[i]), None, "ended", st_ts[i], en_ts[i], reason[i], 0, float(billed[i]))
                for i in range(n)
            ),
        )  # fmt: skip
        running = '{"from": "recovering", "to": "running", "reason": null}'
        con.executemany(
            "INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?,?,?,?,?)",
            ((run_ids[run_idx[i]], None, st_ts[i], "state_change", running) for i in range(n)),
        )
        # the job running again after a preemption: a recovery event on the new attempt
        rec = np.flatnonzero((seq > 1) & np.roll(preempted, 1))
        rec_ts = _ts(started[rec] + rng.uniform(60, 900, len(rec)))
        con.executemany(
            "INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?,?,?,?,?)",
            ((run_ids[run_idx[i]], attempt_ids[i], t, "recovery", "{}") for i, t in zip(rec.tolist(), rec_ts)),
        )
        ck = np.flatnonzero(rng.random(n) < 0.5)
        ck_ts = _ts(started[ck] + dur[ck] * 0.6)
        con.executemany(
            "INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?,?,?,?,?)",
            ((run_ids[run_idx[i]], attempt_ids[i], t, "checkpoint", '{"size_bytes": 2000000000}') for i, t in zip(ck.tolist(), ck_ts)),
        )
        done = np.flatnonzero(~preempted)
        td_ts = _ts(started[done] + billed[done])
        con.executemany(
            "INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?,?,?,?,?)",
            ((run_ids[run_idx[i]], attempt_ids[i], t, "teardown", "{}") for i, t in zip(done.tolist(), td_ts)),
        )
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    # what the ledger writes as attempts and runs end: per-attempt cost facts, the runs' cost rollup
    from sqlalchemy import create_engine

    from launcher.ledger.facts import write_facts
    from launcher.ledger.rollup import backfill

    engine = create_engine(f"sqlite:///{tmp}")
    with engine.begin() as conn:
        write_facts(conn)
        backfill(conn)
    engine.dispose()
    os.replace(tmp, path)
    Path(str(tmp) + ".migrate.lock").unlink(missing_ok=True)  # the ledger's migration lock file


def timed_in_process(url: str, repeat: int, use_cache: bool = False) -> list[dict[str, float]]:
    from launcher.ledger import Ledger
    from launcher.report.build import ReportQuery, report_from_data
    from launcher.report.formats import to_csv
    from launcher.report.load import load_ledger_data
    from launcher.report.periods import Window

    out = []
    now = datetime(2026, 12, 1, tzinfo=UTC)
    for _ in range(repeat):
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        with Ledger(url) as led:
            t["open_ledger_s"] = time.perf_counter() - t0
            data = load_ledger_data(led, Window(), keys=["experiment"], now=now, timings=t, use_cache=use_cache)
        t1 = time.perf_counter()
        result = report_from_data(data, ReportQuery(by=("experiment",)))
        t2 = time.perf_counter()
        text = to_csv(result)
        t3 = time.perf_counter()
        t.update(pandas_s=t2 - t1, csv_s=t3 - t2, total_s=t3 - t0, rows=float(len(result.frame)),
                 attempts=float(len(data.attempts)), bytes=float(len(text)))  # fmt: skip
        out.append(t)
    return out


def timed_rollup(url: str, repeat: int, by: str = "experiment") -> list[dict[str, float]]:
    """The CLI's path for grouped reports, in process: the ledger's cost rollup summed in the
    database, runs crossing the window read attempt by attempt."""
    from launcher.ledger import Ledger
    from launcher.report.build import ReportQuery
    from launcher.report.formats import to_csv
    from launcher.report.rollup_report import report_from_rollup, rollup_applies

    now = datetime(2026, 12, 1, tzinfo=UTC)
    query = ReportQuery(by=tuple(by.split(",")))
    assert rollup_applies(query)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        with Ledger(url) as led:
            t1 = time.perf_counter()
            result = report_from_rollup(led, query, now=now)
        t2 = time.perf_counter()
        text = to_csv(result)
        t3 = time.perf_counter()
        out.append({"open_ledger_s": t1 - t0, "rollup_s": t2 - t1, "csv_s": t3 - t2, "total_s": t3 - t0,
                    "rows": float(len(result.frame)), "attempts": float(result.frame["x_Attempts"].sum()),
                    "bytes": float(len(text))})  # fmt: skip
    return out


def timed_cli(url: str, repeat: int, use_cache: bool, by: str = "experiment") -> list[float]:
    env = {**os.environ, "LAUNCHER_DB_URL": url, "LAUNCHER_HOME": str(BENCH_DIR / "home")}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "launcher.cli.main", "report", "--by", by, "--format", "csv",
             "--as-of", "2026-12-01", *([] if use_cache else ["--no-cache"])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        )  # fmt: skip
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"launcher report failed: {p.stderr}")
    return times


def main() -> None:
    os.environ["LAUNCHER_HOME"] = str(BENCH_DIR / "home")  # the in-process cache lives there too
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument(
        "--attempt-index", action="store_true",
        help="also time a copy with the proposed events(attempt_id, kind, at) index (the loader then "
        "uses per-attempt lookups instead of one GROUP BY)",
    )  # fmt: skip
    ap.add_argument(
        "--incremental", type=int, metavar="N", default=0,
        help="also time the report after N new checkpoint events on ended attempts (on a copy)",
    )  # fmt: skip
    ap.add_argument("--pg", metavar="URL", help="also time the same ledger copied into PostgreSQL at URL")
    ap.add_argument("--pg-only", action="store_true", help="with --pg: skip the SQLite timings")
    ap.add_argument("--by-day", action="store_true", help="also time --by project,day (not in the rollup: read through the report cache)")
    args = ap.parse_args()
    BENCH_DIR.mkdir(exist_ok=True)
    path = BENCH_DIR / f"report-ledger-{args.attempts}-v{LAYOUT_VERSION}.db"
    if args.rebuild or not path.exists():
        t0 = time.perf_counter()
        build(path, args.attempts)
        print(f"built {path.relative_to(REPO)} in {time.perf_counter() - t0:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
    else:
        print(f"using cached {path.relative_to(REPO)} ({path.stat().st_size / 1e6:.0f} MB; --rebuild to rebuild)")
    if not args.pg_only:
        report(f"sqlite:///{path}", args.repeat, "SQLite", by_day=args.by_day)
    if args.pg:
        pg_url = copy_to_postgres(path, args.pg, args.attempts)
        report(pg_url, args.repeat, "PostgreSQL", target_s=TARGET_PG_S, by_day=args.by_day)
    if args.incremental:
        incremental(path, args.incremental)
    if args.attempt_index:
        indexed = path.with_name(path.stem + "-attempt-index.db")
        if not indexed.exists() or args.rebuild:
            import shutil

            shutil.copy(path, indexed)
            con = sqlite3.connect(indexed)
            con.execute("CREATE INDEX IF NOT EXISTS ix_bench_events_attempt ON events (attempt_id, kind, at)")
            con.commit()
            con.close()
        report(f"sqlite:///{indexed}", args.repeat, "with an events(attempt_id, kind, at) index")


def incremental(path: Path, n_events: int) -> None:
    """Warm cache, then N checkpoint events land on random ended attempts: the next report
    re-reads those attempts and runs and rewrites the cache files."""
    import shutil

    copy = path.with_name(path.stem + "-incremental.db")
    shutil.copy(path, copy)
    url = f"sqlite:///{copy}"
    try:
        timed_in_process(url, 1, use_cache=True)  # cold: builds the cache for the copy
        con = sqlite3.connect(copy)
        picks = con.execute("SELECT attempt_id, run_id FROM attempts ORDER BY random() LIMIT ?", (n_events,)).fetchall()
        with con:
            con.executemany(
                "INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?,?,?,?,?)",
                [(r, a, "2026-10-30 00:00:00.000000", "checkpoint", '{"size_bytes": 1000000000}') for a, r in picks],
            )
        con.close()
        after = timed_in_process(url, 1, use_cache=True)
        warm = timed_in_process(url, 1, use_cache=True)
        print(f"\nafter {n_events:,} new checkpoint events on ended attempts (report cache incremental):")
        print(f"{'in process total':<34}{after[0]['total_s']:>10.3f}  (cache refresh {after[0]['cache_refresh_s']:.3f})")
        print(f"{'next report (warm again)':<34}{warm[0]['total_s']:>10.3f}")
    finally:
        from launcher.report.cache import default_cache_dir

        for p in copy.parent.glob(copy.name + "*"):
            p.unlink()
        shutil.rmtree(default_cache_dir(url), ignore_errors=True)


def copy_to_postgres(path: Path, base_url: str, n_attempts: int) -> str:
    """The SQLite bench ledger copied into PostgreSQL schema bench_report_N (built once: kept
    while its row counts match). Returns the ledger URL (search_path set to that schema)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from launcher.ledger import Ledger
    from launcher.ledger.engine import normalize_url

    schema = f"bench_report_{n_attempts}_v{LAYOUT_VERSION}"
    url = make_url(normalize_url(base_url)).update_query_dict({"options": f"-csearch_path={schema}"})
    url_s = url.render_as_string(hide_password=False)
    admin = create_engine(normalize_url(base_url), isolation_level="AUTOCOMMIT")
    src = sqlite3.connect(path)
    tables = ("runs", "attempts", "attempt_facts", "events", "cost_rollup", "cost_rollup_runs")
    want = {t: src.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    with admin.connect() as c:
        exists = c.execute(text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": schema}).first()
        if exists:
            have = {t: c.execute(text(f'SELECT count(*) FROM "{schema}".{t}')).scalar() for t in tables}
            if have == want:
                print(f"using PostgreSQL schema {schema} ({sum(want.values()):,} rows)")
                return url_s
            c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    Ledger(url_s).close()  # schema at head, via the ledger's own migrations
    t0 = time.perf_counter()
    import psycopg

    with psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False)) as pg:
        pg.execute("SET TIME ZONE 'UTC'")  # the SQLite text times are UTC
        for t in tables:
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({t})")]
            with pg.cursor().copy(f"COPY {t} ({', '.join(cols)}) FROM STDIN") as cp:
                for row in src.execute(f"SELECT {', '.join(cols)} FROM {t}"):
                    cp.write_row(row)
        pg.execute("SELECT setval(pg_get_serial_sequence('events', 'id'), (SELECT max(id) FROM events))")
        pg.execute("ANALYZE")
    print(f"copied the ledger into PostgreSQL schema {schema} in {time.perf_counter() - t0:.0f} s")
    return url_s


def report(url: str, repeat: int, label: str, target_s: float = TARGET_S, by_day: bool = False) -> None:
    runs = timed_in_process(url, repeat)
    cli = timed_cli(url, repeat, use_cache=False)
    _print(runs, cli, label + ", reading every attempt (--no-cache)", target_s)
    _drop_cache()  # cold: nothing cached (an earlier bench run left its cache in .bench/home)
    cli_cold = timed_cli(url, 1, use_cache=True)  # a fresh process, nothing cached: the rollup
    rolled = timed_rollup(url, repeat)
    cli_warm = timed_cli(url, repeat, use_cache=True)
    _print(rolled, cli_warm, label + ", the ledger's cost rollup (what the CLI reads)", target_s)
    month = timed_cli(url, repeat, use_cache=True, by="project,month")
    rows = [("every attempt (--no-cache)", runs, cli), ("cold (fresh process, nothing cached)", rolled[:1], cli_cold),
            ("warm (same again)", rolled[1:] or rolled, cli_warm)]  # fmt: skip
    print(f"\n{'--by experiment, the same ledger':<38}{'in process s':>14}{'CLI s':>10}{'every attempt / this':>22}")
    for name, inproc, clis in rows:
        best = min(r["total_s"] for r in inproc)
        print(f"{name:<38}{best:>14.3f}{min(clis):>10.3f}{min(cli) / min(clis):>22.1f}")
    print(f"{'--by project,month (rollup), CLI':<38}{'':>14}{min(month):>10.3f}")
    if by_day:  # daily buckets are not in the (monthly) rollup: the attempts are read, through the report cache
        _drop_cache()
        day_cold = timed_cli(url, 1, use_cache=True, by="project,day")
        day_warm = timed_cli(url, 1, use_cache=True, by="project,day")
        print(f"{'--by project,day cold / warm cache, CLI':<38}{'':>14}{min(day_cold):>10.3f}{min(day_warm):>10.3f}")
    where = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    verdict = "PASS" if cli_cold[0] < target_s else "OVER"
    print(f"target: cold < {target_s:.0f} s end to end on {where}: {verdict} "
          f"(load avg now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")  # fmt: skip


def _drop_cache() -> None:
    import shutil

    shutil.rmtree(BENCH_DIR / "home" / "cache", ignore_errors=True)


def _print(runs: list[dict[str, float]], cli: list[float], label: str, target_s: float = TARGET_S) -> None:
    best = min(runs, key=lambda r: r["total_s"])
    print(f"\nlauncher report --by experiment --format csv ({label}): {int(best['attempts']):,} attempts -> {int(best['rows']):,} rows")
    print(f"{'phase':<34}{'best s':>10}{'median s':>10}")
    for key, label in [
        ("open_ledger_s", "open ledger (schema check)"),
        ("cache_refresh_s", "report cache refresh"),
        ("sql_attempts_s", "SQL fetch: attempts + run keys"),
        ("sql_events_s", "SQL fetch: checkpoints, prices"),
        ("sql_prices_s", "SQL fetch: price events"),
        ("rollup_s", "rollup sums + crossing runs"),
        ("pandas_s", "pandas: costs, split, group"),
        ("csv_s", "CSV text"),
        ("total_s", "in process total"),
    ]:
        vals = [r[key] for r in runs if key in r]
        if not vals:
            continue
        print(f"{label:<34}{min(vals):>10.3f}{statistics.median(vals):>10.3f}")
    print(f"{'end to end (CLI subprocess)':<34}{min(cli):>10.3f}{statistics.median(cli):>10.3f}")
    verdict = "PASS" if min(cli) < target_s else "OVER"
    print(f"\ntarget < {target_s:.0f} s end to end: {verdict} (cores: {os.cpu_count()}, load avg {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
