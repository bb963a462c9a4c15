"""Ten processes at once on a fresh ledger; kill -9 in the middle of a write loop."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from launcher.ledger import Ledger, RunState

WORKER = Path(__file__).with_name("worker.py")
N_PROCS = 10
N_RUNS = 5


@pytest.mark.slow
def test_ten_processes_at_once_lose_nothing(fresh_ledger_url: str, tmp_path: Path) -> None:
    ledger_url = fresh_ledger_url
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "burst", ledger_url, str(go), str(i), str(N_RUNS), "r-shared"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for i in range(N_PROCS)
    ]
    time.sleep(1.0)  # let them import, then release all at once (they also race the migration)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "locked" not in err
        results.append(json.loads(out.strip().splitlines()[-1]))

    assert sum(r["created_shared"] for r in results) == 1  # exactly one creator
    assert sum(r["won_cas"] for r in results) == 1  # exactly one pending -> running
    assert sorted(r["shared_seq"] for r in results) == list(range(1, N_PROCS + 1))  # no gaps, no dupes
    with Ledger(ledger_url) as led:
        runs = led.list_runs(limit=None)
        assert len(runs) == N_PROCS * N_RUNS + 1
        for i in range(N_PROCS):
            for j in range(N_RUNS):
                rid = f"w{i}-{j}"
                run = next(r for r in runs if r.run_id == rid)
                assert run.state == RunState.RUNNING and run.tags == {"worker": str(i)}
                [attempt] = led.attempts(rid)
                assert attempt.end_reason == "completed"
                assert [e.kind for e in led.events(rid)] == ["state_change", "checkpoint"]
                assert led.last_heartbeat(run_id=rid) is not None
        assert led.get_run("r-shared").state == RunState.RUNNING
        assert len(led.open_attempts(run_id="r-shared")) == N_PROCS


def _committed(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"run": [], "attempt": [], "event": []}
    for line in lines:
        kind, _, ident = line.partition(" ")
        if kind in out:
            out[kind].append(ident)
    return out


@pytest.mark.slow
def test_kill_9_mid_write_leaves_a_readable_complete_ledger(ledger_url: str) -> None:
    rng = random.Random(1234)
    committed: dict[str, list[str]] = {"run": [], "attempt": [], "event": []}
    for rep in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "loop", ledger_url, f"k{rep}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip()]
        assert lines[0] == "ready -"
        target = rng.randint(3, 30)
        while len(lines) < target:
            lines.append(proc.stdout.readline().strip())
        time.sleep(rng.random() * 0.05)  # land at an arbitrary point of a write
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        lines += [x for x in rest.splitlines() if x]  # writes acknowledged before the kill
        assert proc.returncode == -signal.SIGKILL
        for kind, ids in _committed(lines).items():
            committed[kind] += ids

        path = make_url(ledger_url).database
        if make_url(ledger_url).get_backend_name() == "sqlite":
            with sqlite3.connect(path) as con:
                assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        with Ledger(ledger_url) as led:  # opens, and every acknowledged write is there
            run_ids = {r.run_id for r in led.list_runs(limit=None)}
            assert set(committed["run"]) <= run_ids
            for aid in committed["attempt"]:
                assert led.get_attempt(aid).run_id in run_ids
            events = {e.id for rid in run_ids for e in led.events(rid)}
            assert {int(e) for e in committed["event"]} <= events
    assert len(committed["run"]) >= 5


OPEN_LEDGER = """
import sys
from launcher.ledger import Ledger
Ledger(sys.argv[1]).close()
print("opened", flush=True)
"""


def _upgrade_lock_held(url: str, pid: int, app: str) -> bool:
    """Is the child inside Ledger()'s locked upgrade? SQLite: it holds the flock on
    `<db>.migrate.lock` (/proc/locks); PostgreSQL: its session holds the advisory lock."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        lock = Path(u.database + ".migrate.lock")
        try:
            inode = lock.stat().st_ino
            held = Path("/proc/locks").read_text().splitlines()
        except OSError:
            return False
        return any(f.split()[4] == str(pid) and f.split()[5].rsplit(":", 1)[-1] == str(inode) for f in held if len(f.split()) > 5)
    from sqlalchemy import create_engine, text

    eng = create_engine(u.difference_update_query(["options"]), isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            q = text("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                     "WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = :app")
            return c.execute(q, {"app": app}).scalar() > 0
    finally:
        eng.dispose()


def _schema_state(url: str) -> str:
    """'empty' (nothing of the schema), 'head' (complete), or what was found (a partial schema)."""
    from sqlalchemy import create_engine, inspect

    from launcher.ledger.engine import SCHEMA_HEAD, _stored_revision

    eng = create_engine(url)
    try:
        tables = set(inspect(eng).get_table_names())
        if not tables:
            return "empty"
        rev = _stored_revision(eng)
        return "head" if rev == SCHEMA_HEAD and "runs" in tables else f"partial: {sorted(tables)} at {rev}"
    finally:
        eng.dispose()


@pytest.mark.slow
def test_kill_9_inside_ledger_upgrade_leaves_an_openable_ledger(fresh_ledger_url: str) -> None:
    """A real Ledger() killed while it holds the upgrade lock leaves no partial schema and no
    stuck lock; the next open finishes the job. Repeated until a kill lands mid-upgrade."""
    import uuid

    mid_kills = 0
    for _ in range(6):
        app = "kill-upgrade-" + uuid.uuid4().hex[:8]
        u = make_url(fresh_ledger_url)
        url = fresh_ledger_url if u.get_backend_name() == "sqlite" else u.update_query_dict({"application_name": app}).render_as_string(hide_password=False)
        proc = subprocess.Popen([sys.executable, "-c", OPEN_LEDGER, url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 60
        while proc.poll() is None and not _upgrade_lock_held(url, proc.pid, app):
            assert time.monotonic() < deadline, "the child never took the upgrade lock"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        state = _schema_state(fresh_ledger_url)
        assert state in ("empty", "head"), state  # all or nothing
        if u.get_backend_name() == "sqlite":
            with sqlite3.connect(u.database) as con:
                assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        if proc.returncode == -signal.SIGKILL and state == "empty":
            mid_kills += 1
            start = time.monotonic()
            with Ledger(fresh_ledger_url) as led:
                assert led.list_runs() == []
            assert time.monotonic() - start < 30  # the dead process's lock did not block us
            assert _schema_state(fresh_ledger_url) == "head"
            break
    assert mid_kills == 1, "no kill landed inside the upgrade"
