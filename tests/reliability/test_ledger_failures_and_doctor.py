"""Failures outside our control are told plainly (exit 5, one line, no SQL) and `launcher doctor`
repairs what can be repaired: a write-ahead log left by a killed writer, runs left inconsistent,
job processes outliving their run, stale clusters; it says what it cannot repair."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import event

from launcher.executors.local import run_process_groups
from launcher.ledger import Ledger
from launcher.ledger.failures import LedgerUnavailableError
from tests.conftest import run_cli

SPEC = """name: {name}
resources: {{cpus: 1+}}
run: sleep 120
envs: {{API_TOKEN: tok-very-secret-123}}
launcher: {{project: p, owner: ana, experiment: e, expected_hours: 0.05, budget_usd: 1}}
"""


def _doctor(*args: str) -> tuple[int, list[dict]]:
    res = run_cli("doctor", "--json", *args, timeout=120)
    assert "Traceback" not in res.stderr
    return res.returncode, json.loads(res.stdout)


def test_damaged_ledger_is_exit_5_with_one_line_and_doctor_cannot_repair_it(launcher_home):
    (launcher_home / "ledger.db").write_bytes(b"this is not a database at all" * 100)
    res = run_cli("runs", "list", timeout=60)
    assert res.returncode == 5, res.stderr
    assert "is damaged" in res.stderr and "launcher doctor" in res.stderr and "restore it from a backup" in res.stderr
    assert "SELECT" not in res.stderr and "internal error" not in res.stderr
    code, findings = _doctor()
    assert code == 5
    assert [(f["check"], f["status"]) for f in findings] == [("ledger-file", "cannot repair")]


def test_doctor_folds_a_write_ahead_log_left_by_a_killed_writer(launcher_home):
    assert run_cli("doctor", timeout=60).returncode == 0  # no ledger: nothing to check, nothing created
    assert not (launcher_home / "ledger.db").exists()
    Ledger().close()
    db = launcher_home / "ledger.db"
    writer = (
        "import os, signal, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "c.execute('UPDATE alembic_version SET version_num = version_num')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(db)], timeout=60)
    wal = launcher_home / "ledger.db-wal"
    assert wal.exists() and wal.stat().st_size > 0
    code, findings = _doctor()
    assert code == 0, findings
    first = findings[0]
    assert first["check"] == "ledger-file" and first["status"] == "repaired", first
    assert re.search(r"folded \d+ write-ahead log pages", first["detail"])
    assert not wal.exists() or wal.stat().st_size == 0


@pytest.mark.slow
def test_doctor_reports_stuck_runs_and_repairs_orphans(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(name="stuck"))
    res = run_cli("launch", str(spec), "--detach", "--yes", "--cheapest", timeout=120)
    assert res.returncode == 0, res.stderr
    pid = int(re.search(r"controller pid (\d+)", res.stderr).group(1))
    with Ledger() as led:
        run_id = next(r.run_id for r in led.list_runs() if r.name == "stuck")
        deadline = time.monotonic() + 60
        while not run_process_groups(run_id) or led.get_run(run_id).state != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)  # the controller dies; the job keeps running
    try:
        code, findings = _doctor()
        assert code == 5
        stuck = [f for f in findings if f["check"] == "stuck-runs"]
        assert stuck[0]["status"] == "needs you" and f"launch --resume {run_id}" in stuck[0]["detail"], findings

        # A failed multi-row write left the run ended with its attempt open and its job alive.
        with Ledger() as led:
            led.set_run_state(run_id, "failed", reason="failed")
        code, findings = _doctor()
        by = {f["check"]: f for f in findings}
        assert code == 0, findings
        assert by["stuck-runs"]["status"] == "repaired" and "closed 1 attempt" in by["stuck-runs"]["detail"]
        assert by["orphan-processes"]["status"] == "repaired", findings
        assert by["stale-clusters"]["status"] == "repaired", findings
        with Ledger() as led:
            assert led.open_attempts(run_id=run_id) == []
        code, again = _doctor()
        assert code == 0 and {f["status"] for f in again} == {"ok"}, again
        assert "tok-very-secret-123" not in json.dumps(findings + again)
    finally:
        run_cli("down", run_id, "--wait", "20", timeout=60)


def test_disk_full_write_is_told_and_leaves_the_run_where_it_was(launcher_home):
    from launcher.ledger import RunRecord

    with Ledger() as led:
        led.create_run(RunRecord(run_id="r-full", name="r-full", spec_hash="h", spec_yaml="run: true", project="p"))
        before = led.get_run("r-full").state

        @event.listens_for(led.engine, "connect")
        def _cap(dbapi_conn, _rec):  # a real SQLITE_FULL: the file may not grow past its size
            pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
            dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

        led.engine.dispose()  # new connections get the cap
        with pytest.raises(LedgerUnavailableError) as err:
            led.add_event("r-full", "note", {"blob": "x" * 2_000_000})
        assert "is full" in str(err.value) and "INSERT" not in str(err.value)
        assert led.get_run("r-full").state == before
