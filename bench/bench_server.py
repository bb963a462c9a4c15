"""`launcher server` replicas on a shared ledger: adoption latency, lease heartbeat load, and how
many runs one replica drives before its tick falls behind.

    .venv/bin/python bench/bench_server.py --db postgresql+psycopg://postgres@127.0.0.1:55432/postgres

(default: LAUNCHER_TEST_PG_URL, else a SQLite file). Each part runs in a schema / file of its own.

1. Adoption latency: replica A holds runs and dies (stops renewing, no release); replica B adopts
   them. Measured from A's death to B's claim, against the lease time (the peer: a replica can
   not adopt before the lease expires, and should not need much more than one heartbeat after).
2. Heartbeat load per run: one lease renewal (one UPDATE for all of a replica's leases) against
   the controller's own per-run heartbeat write, which it already makes once a second per run
   (the peer): statements per second per run and database time per run-second.
3. Runs per replica on this machine: N simulated runs, each a thread making a controller's steady
   ledger traffic through the fenced ledger (a heartbeat write and a state read per second), while
   the replica ticks every second. "Falls behind" when the 95th percentile tick takes longer than
   its interval or the 95th percentile beat is late by more than one interval. The table shows how tick time and beat lag grow with N.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launcher.ledger import RunRecord  # noqa: E402
from launcher.ledger.leases import LeaseLedger  # noqa: E402
from launcher.server.replica import Replica  # noqa: E402


@contextmanager
def ledger_url(base: str | None):
    if base and base.startswith("postgresql"):
        from sqlalchemy import create_engine, text
        from sqlalchemy.engine import make_url

        schema = "bench_" + uuid.uuid4().hex[:10]
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE SCHEMA "{schema}"'))
        try:
            yield make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
        finally:
            with admin.connect() as c:
                c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()
    else:
        with tempfile.TemporaryDirectory() as d:
            yield f"sqlite:///{d}/ledger.db"


def submit(led: LeaseLedger, n: int) -> list[str]:
    ids = []
    for i in range(n):
        run_id = f"r-bench-{uuid.uuid4().hex[:8]}-{i}"
        led.create_run(RunRecord(run_id=run_id, name="bench", spec_hash="h", spec_yaml="run: x", project="bench"))
        led.submit_lease(run_id)
        ids.append(run_id)
    return ids


def idle_drive(stop: threading.Event):
    def drive(fenced, claim):
        while not stop.is_set():
            try:
                fenced.heartbeat(run_id=claim.run_id)
            except Exception:
                return
            stop.wait(1.0)

    return drive


def adoption(base: str | None, ttl_s: float, runs: int, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        with ledger_url(base) as url, LeaseLedger(url) as led:
            submit(led, runs)
            stop = threading.Event()
            a = Replica(led, owner_id="A", ttl_s=ttl_s, max_runs=runs, claim_batch=runs, drive=idle_drive(stop), log=lambda m: None)
            b = Replica(led, owner_id="B", ttl_s=ttl_s, max_runs=runs, claim_batch=runs, drive=idle_drive(stop), log=lambda m: None)
            a.tick()
            a.start()
            time.sleep(ttl_s / 2)
            a.stop(release=False)  # A dies: no more renewals, nothing handed back
            died = time.monotonic()
            b.start()
            while b.stats.adopted < runs and time.monotonic() - died < 10 * ttl_s:
                time.sleep(0.01)
            out.append(time.monotonic() - died)
            stop.set()
            b.stop()
            join_runs()
    return out


def heartbeat_load(base: str | None, held: int, samples: int) -> tuple[float, float]:
    """(seconds per renewal of `held` leases, seconds per controller heartbeat write)."""
    with ledger_url(base) as url, LeaseLedger(url) as led:
        ids = submit(led, held)
        led.claim_leases("A", ttl_s=60, limit=held)
        t0 = time.perf_counter()
        for _ in range(samples):
            led.renew_leases("A", ttl_s=60)
        renew = (time.perf_counter() - t0) / samples
        t0 = time.perf_counter()
        for i in range(samples):
            led.heartbeat(run_id=ids[i % held])
        beat = (time.perf_counter() - t0) / samples
    return renew, beat


def capacity(base: str | None, n: int, seconds: float) -> dict[str, float]:
    from launcher.server.serve import SERVER_POOL_SIZE

    with ledger_url(base) as url, LeaseLedger(url, pool_size=SERVER_POOL_SIZE) as led:
        submit(led, n)
        stop = threading.Event()
        lags: list[float] = []
        lock = threading.Lock()

        def drive(fenced, claim):
            next_at = time.monotonic()
            while not stop.is_set():
                lag = time.monotonic() - next_at
                with lock:
                    lags.append(max(0.0, lag))
                try:
                    fenced.heartbeat(run_id=claim.run_id)
                    fenced.get_run(claim.run_id)
                except Exception:
                    return
                next_at += 1.0
                stop.wait(max(0.0, next_at - time.monotonic()))

        rep = Replica(led, owner_id="A", ttl_s=30, heartbeat_s=1.0, max_runs=n, claim_batch=n, drive=drive, log=lambda m: None)
        rep.start()
        deadline = time.monotonic() + 60
        while len(rep.running()) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        with lock:
            lags.clear()
        ticks_before = len(rep.stats.tick_seconds)
        time.sleep(seconds)
        stop.set()
        rep.stop()
        join_runs()
        ticks = rep.stats.tick_seconds[ticks_before:]
        with lock:
            lag = sorted(lags)
    return {
        "tick_p50": statistics.median(ticks) if ticks else float("nan"),
        "tick_max": max(ticks) if ticks else float("nan"),
        "tick_p95": sorted(ticks)[int(0.95 * (len(ticks) - 1))] if ticks else float("nan"),
        "lag_p95": lag[int(0.95 * (len(lag) - 1))] if lag else float("nan"),
        "lag_max": lag[-1] if lag else float("nan"),
    }


def join_runs(timeout_s: float = 30.0) -> None:
    """Wait for the replicas' run threads to finish before their schema goes away."""
    deadline = time.monotonic() + timeout_s
    for t in [t for t in threading.enumerate() if t.name.startswith("run-")]:
        t.join(timeout=max(0.0, deadline - time.monotonic()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=os.environ.get("LAUNCHER_TEST_PG_URL"), help="PostgreSQL base URL (default: LAUNCHER_TEST_PG_URL; SQLite when unset)")
    ap.add_argument("--runs", default="25,50,100,200", help="run counts for the capacity table")
    ap.add_argument("--seconds", type=float, default=8.0, help="steady-state seconds per capacity row")
    ap.add_argument("--parts", default="1,2,3", help="which parts to run")
    args = ap.parse_args()
    kind = "PostgreSQL" if args.db and args.db.startswith("postgresql") else "SQLite"
    print(f"ledger: {kind}; machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")

    parts = set(args.parts.split(","))
    if "1" in parts:
        adoption_table(args)
    if "2" in parts:
        load_table(args)
    if "3" in parts:
        capacity_table(args)


def adoption_table(args) -> None:
    print("1. adoption latency after a replica dies (10 runs held; 3 tries)")
    print(f"{'lease s':>8} {'heartbeat s':>12} {'adoption s (min/med/max)':>26} {'adoption / lease':>17}")
    for ttl in (2.0, 5.0):
        lat = adoption(args.db, ttl, runs=10, repeat=3)
        med = statistics.median(lat)
        print(f"{ttl:>8.1f} {ttl / 3:>12.2f} {min(lat):>8.2f} / {med:.2f} / {max(lat):.2f}{'':>3} {med / ttl:>17.2f}")


def load_table(args) -> None:
    print("\n2. heartbeat load per run (a replica renews every lease_time/3 = 10 s; controllers beat every 1 s)")
    print(f"{'leases':>7} {'renew ms':>9} {'beat ms':>8} {'lease stmts/s/run':>18} {'beat stmts/s/run':>17} {'lease DB ms/s/run':>18} {'beat DB ms/s/run':>17}")
    for held in (1, 10, 100, 1000):
        renew, beat = heartbeat_load(args.db, held, samples=50)
        per_run_stmt = 1 / (10.0 * held)
        print(f"{held:>7} {renew * 1e3:>9.2f} {beat * 1e3:>8.2f} {per_run_stmt:>18.4f} {1.0:>17.1f} {renew * 1e3 / 10.0 / held:>18.4f} {beat * 1e3:>17.2f}")


def capacity_table(args) -> None:
    print(f"\n3. runs one replica drives (1 s tick; each run: 1 heartbeat write + 1 state read per second), {args.seconds:g} s each")
    print(f"{'runs':>6} {'tick p50 ms':>12} {'tick max ms':>12} {'beat lag p95 ms':>16} {'beat lag max ms':>16} {'behind?':>8}")
    for n in (int(x) for x in args.runs.split(",")):
        r = capacity(args.db, n, args.seconds)
        behind = r["tick_p95"] > 1.0 or r["lag_p95"] > 1.0  # one late beat under a shared CPU is noise
        print(f"{n:>6} {r['tick_p50'] * 1e3:>12.1f} {r['tick_max'] * 1e3:>12.1f} {r['lag_p95'] * 1e3:>16.1f} {r['lag_max'] * 1e3:>16.1f} {'yes' if behind else 'no':>8}")


if __name__ == "__main__":
    main()
