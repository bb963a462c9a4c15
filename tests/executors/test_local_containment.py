"""The local executor's hold on a job: exit codes recorded where a later process can read them,
and processes that leave their rank's session stopped with the job (cgroup v2, or the fallback)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from launcher.executors import Outcome
from launcher.executors.job_status import ended_outcome, exit_path
from launcher.executors.local import kill_recorded_processes
from tests.executors.test_local_executor import _request, _start
from tests.reliability.test_orphan_jobs import _cgroup_v2_writable

RUN_ID = f"r-contain-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_pid_file(path: Path) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            pid = int(path.read_text())
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                return pid
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path} after 20s")


def _clean_up(unrelated: subprocess.Popen, escapee: int | None) -> None:
    unrelated.kill()
    unrelated.wait()
    if escapee is not None and _alive(escapee):
        os.kill(escapee, signal.SIGKILL)


def _started_and_up(req):
    """Start the job; return once its log says `up` (at most 8 s)."""
    ex = _start(req)
    log = req.run_dir / "logs" / "rank-0.log"
    for _ in range(400):
        if "up" in log.read_text():
            break
        time.sleep(0.02)
    return ex, log


def test_exit_codes_are_recorded_per_rank_and_read_back(tmp_path):
    # Rank 1 fails only once rank 0's code is recorded: a failing rank stops its peers, and a
    # peer stopped first would be recorded as stopped (143), not 0, on a slow machine.
    first = exit_path(tmp_path / "run", 1, "run", 0)
    run = f'if [ "$SKYPILOT_NODE_RANK" = 1 ]; then until [ -s {first} ]; do sleep 0.05; done; exit 3; fi; exit 0'
    req = _request(tmp_path, run=run, num_nodes=2, run_id=RUN_ID)
    assert exit_path(req.run_dir, 1, "run", 0) == first
    result = _start(req).wait(30)
    assert result.outcome is Outcome.FAILED and result.exit_code == 3
    assert [exit_path(req.run_dir, 1, "run", r).read_text() for r in range(2)] == ["0\n", "3\n"]
    job = ended_outcome(req.run_dir, 1, 2)
    assert (job.outcome, job.exit_code) == (Outcome.FAILED, 3)


def test_the_code_a_job_exits_with_after_sigterm_is_what_is_recorded(tmp_path):
    req = _request(tmp_path, run="trap 'echo saving; exit 75' TERM; echo up; sleep 30 & wait", run_id=RUN_ID)
    ex, log = _started_and_up(req)
    ex.notify_preemption(grace_s=5)
    result = ex.wait(20)
    assert result.outcome is Outcome.PREEMPTED and result.exit_code == 75
    assert exit_path(req.run_dir, 1, "run", 0).read_text() == "75\n"
    assert ended_outcome(req.run_dir, 1, 1).outcome is Outcome.PREEMPTED
    assert "Terminated" not in log.read_text()  # the wrapper says nothing in the job's log


def test_a_job_that_ended_leaves_no_setsid_process_behind_with_a_cgroup(tmp_path):
    if not _cgroup_v2_writable():
        pytest.skip("no writable cgroup v2 here")
    pid_file = tmp_path / "escapee"
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)
    escapee = None
    try:
        req = _request(
            tmp_path, run_id=RUN_ID,
            run=f'( env -u LAUNCHER_RUN_ID setsid sleep 300 >/dev/null 2>&1 & echo $! > {pid_file} ); '
                f'while [ "$(cat /proc/$(cat {pid_file})/comm)" != sleep ]; do sleep 0.02; done',
        )  # fmt: skip
        result = _start(req).wait(30)
        escapee = int(pid_file.read_text())
        assert result.outcome is Outcome.SUCCEEDED
        assert not _alive(escapee)
        assert unrelated.poll() is None
    finally:
        _clean_up(unrelated, escapee)


def test_without_a_cgroup_stop_reaches_a_setsid_child_of_the_job(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHER_CGROUP_ROOT", "off")
    pid_file = tmp_path / "escapee"
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)
    escapee = None
    try:
        req = _request(tmp_path, run_id=RUN_ID, run=f"env -u LAUNCHER_RUN_ID setsid sleep 300 & echo $! > {pid_file}; sleep 300")
        ex = _start(req)
        escapee = _wait_pid_file(pid_file)
        result = ex.stop(grace_s=2)
        assert result.outcome is Outcome.CANCELLED
        assert not _alive(escapee)
        assert unrelated.poll() is None
    finally:
        _clean_up(unrelated, escapee)


def test_a_preemption_notice_is_one_sigterm_per_process(tmp_path):
    # The rank's group, its session's strays and the attempt's cgroup overlap: each process must
    # still see the notice once, or a job's save-and-exit handler runs twice.
    run = "n=0; trap 'n=$((n+1)); echo term $n' TERM; echo up; for i in $(seq 60); do sleep 0.05; done; echo total $n; exit 75"
    req = _request(tmp_path, run=run, run_id=RUN_ID)
    ex, log = _started_and_up(req)
    ex.notify_preemption(grace_s=20)
    result = ex.wait(30)
    assert result.outcome is Outcome.PREEMPTED and result.exit_code == 75
    text = log.read_text()
    assert "total 1" in text and "term 2" not in text, text


def test_a_process_carrying_the_run_id_in_a_foreign_group_is_stopped_alone(tmp_path):
    # A process with LAUNCHER_RUN_ID=<run> inside someone else's session and group (here an
    # innocent `sleep` leads both; in CI it was the test runner's session): cleanup stops that
    # process only, never the group or session around it.
    run_id = f"r-foreign-{os.getpid()}"
    innocent = subprocess.Popen(
        ["bash", "-c", f"LAUNCHER_RUN_ID={run_id} sleep 60 & echo $!; exec sleep 60"],
        start_new_session=True, stdout=subprocess.PIPE, text=True, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    carrier = int(innocent.stdout.readline())
    try:
        # `echo $!` can run before the child has exec'd `sleep` with the run id in its environment
        deadline = time.monotonic() + 30
        while f"LAUNCHER_RUN_ID={run_id}".encode() not in Path(f"/proc/{carrier}/environ").read_bytes():
            assert time.monotonic() < deadline, "the carrier never started with the run id"
            time.sleep(0.01)
        assert os.getpgid(carrier) == os.getsid(carrier) == innocent.pid
        kill_recorded_processes(tmp_path, grace_s=2.0, run_id=run_id)
        deadline = time.monotonic() + 10
        while _alive(carrier) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(carrier), "the process carrying the run id is stopped"
        assert innocent.poll() is None, "the innocent session leader must survive"
    finally:
        for pid in (carrier, innocent.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        innocent.wait(10)
