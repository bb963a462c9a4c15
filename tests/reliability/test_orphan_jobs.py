"""Jobs that outlive or escape their controller, on the real CLI.

* A job that exits while its controller is dead is recorded as it ended (75 after a checkpoint
  on a preemption notice: `preempted`, with the checkpoint; 0: `completed`), not `abandoned`,
  by whichever command finds it (`launch --resume`, `launcher down`).
* A job process that drops LAUNCHER_RUN_ID and calls `setsid` is stopped by `launcher down`,
  with the controller alive or killed, while an unrelated process started beside it survives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from launcher.ledger import Ledger
from tests.cli.launch_helpers import clean_env, ledger_attempts, ledger_runs, pid_gone, popen_cli, wait_for, write_spec  # noqa: F401
from tests.conftest import run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

SAVE = (
    "python -c 'import os; from launcher.checkpoint import CheckpointStore; "
    'CheckpointStore(os.environ["LAUNCHER_CHECKPOINT_DIR"]).save(42, {"w": b"x"}, {"reason": "preemption"})\''
)
LATEST = (
    "python -c 'import os; from launcher.checkpoint import CheckpointStore; "
    'print("resumed at", CheckpointStore(os.environ["LAUNCHER_CHECKPOINT_DIR"]).latest().step)\''
)


def _start(tmp_path: Path, first_attempt: str) -> tuple[subprocess.Popen, int, int]:
    """A foreground launch whose attempt 1 runs the bash lines `first_attempt` (a later attempt
    prints the checkpoint step it resumes from); returns (controller, job pid, wrapper pid)."""
    script = (
        'echo "attempt $LAUNCHER_ATTEMPT pid $$ $PPID"\n'
        f'if [ "$LAUNCHER_ATTEMPT" = 1 ]; then\n{first_attempt}\nfi\n{LATEST}\necho finished\n'
    )
    spec = write_spec(
        tmp_path,
        f"name: orphan\nenvs: {{FLAG: {tmp_path / 'go'}}}\nrun: |\n{textwrap.indent(script, '  ')}"
        "launcher: {project: t, expected_hours: 0.01}\n",
    )
    proc = popen_cli("launch", str(spec), "--yes", "--grace-seconds", "2")
    line = proc.stdout.readline()
    assert line.startswith("attempt 1 pid "), (line, proc.stderr.read() if proc.poll() is not None else "")
    job, wrapper = map(int, line.split()[-2:])
    return proc, job, wrapper


def _orphan_then_exit(tmp_path: Path, code: int) -> str:
    """Kill the controller with SIGKILL, then let the job end with `code` (saving a checkpoint
    at step 42 first when it is 75); returns the run id once the job is gone."""
    lines = ['while [ ! -e "$FLAG" ]; do sleep 0.05; done', *([SAVE] if code == 75 else []), f"exit {code}"]
    proc, job, wrapper = _start(tmp_path, "\n".join(lines))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    (tmp_path / "go").touch()
    wait_for(lambda: pid_gone(job) and pid_gone(wrapper), 30, what="the orphaned job to exit on its own")
    (run,) = ledger_runs()
    assert run.state == "running"  # nobody recorded anything since the controller died
    return run.run_id


def test_a_job_checkpointing_on_notice_while_the_controller_is_dead_is_preempted_on_resume(tmp_path):
    run_id = _orphan_then_exit(tmp_path, 75)
    r = run_cli("launch", "--resume", run_id)
    assert r.returncode == 0, r.stderr
    assert "resumed at 42" in r.stdout and "finished" in r.stdout
    a1, a2 = ledger_attempts(run_id)
    assert (a1.end_reason, a1.exit_code) == ("preempted", 75)
    assert a2.end_reason == "completed"
    with Ledger() as led:
        ckpts = led.events(run_id, kind="checkpoint")
        closed = led.events(run_id, kind="attempt_closed")
    assert [(e.attempt_id, e.data["step"]) for e in ckpts] == [(a1.attempt_id, 42)]
    assert closed[0].data["checkpoint_step"] == 42
    assert ledger_runs()[0].state == "succeeded"


def test_a_job_that_completed_while_the_controller_was_dead_is_not_run_again(tmp_path):
    run_id = _orphan_then_exit(tmp_path, 0)
    r = run_cli("launch", "--resume", run_id)
    assert r.returncode == 0, r.stderr
    assert "attempt 2" not in r.stdout
    assert [(a.end_reason, a.exit_code) for a in ledger_attempts(run_id)] == [("completed", 0)]
    assert ledger_runs()[0].state == "succeeded"


def test_down_records_the_preemption_of_a_job_that_ended_while_the_controller_was_dead(tmp_path):
    run_id = _orphan_then_exit(tmp_path, 75)
    r = run_cli("down", run_id)
    assert r.returncode == 0, r.stderr
    assert [(a.end_reason, a.exit_code) for a in ledger_attempts(run_id)] == [("preempted", 75)]
    assert ledger_runs()[0].state == "cancelled"


# ---- escaping processes ---------------------------------------------------------------------------


def _cgroup_v2_writable() -> bool:
    """Can this process make a child cgroup v2 and move a process into it? (Checked by hand,
    independently of the product's code.)"""
    mounts = [ln.split(" - ") for ln in Path("/proc/self/mountinfo").read_text().splitlines()]
    points = [left.split()[4] for left, right in (m for m in mounts if len(m) == 2) if right.startswith("cgroup2 ")]
    if not points:
        return False
    probe = Path(points[0]) / f"launcher-test-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        p = subprocess.Popen(["sleep", "5"])
        try:
            (probe / "cgroup.procs").write_text(str(p.pid))
            return True
        except OSError:
            return False
        finally:
            p.kill()
            p.wait()
    finally:
        for _ in range(50):
            try:
                probe.rmdir()
                break
            except OSError:
                time.sleep(0.05)


# setsid in a subshell that exits at once: the escapee is re-parented to init, in a session and
# process group of its own, without LAUNCHER_RUN_ID: only a cgroup still ties it to the job.
DOUBLE_FORK = '( env -u LAUNCHER_RUN_ID setsid sleep 300 >/dev/null 2>&1 & echo $! > "$FLAG" )'
# setsid from the job's own shell: its parent, the job, still lives when `down` comes.
SINGLE_FORK = 'env -u LAUNCHER_RUN_ID setsid sleep 300 >/dev/null 2>&1 & echo $! > "$FLAG"'


def _escapee(pid_file: Path) -> int:
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, what="the job to start its escapee")
    pid = int(pid_file.read_text())

    def own_session() -> bool:  # once `setsid` has run and exec'd `sleep`
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[2]) == pid and int(stat[3]) == pid and Path(f"/proc/{pid}/comm").read_text().strip() == "sleep"

    wait_for(own_session, 10, what="the escapee to be in a process group and session of its own")
    assert b"LAUNCHER_RUN_ID=" not in Path(f"/proc/{pid}/environ").read_bytes()
    return pid


@pytest.mark.parametrize(
    ("containment", "controller"),
    [("cgroup", "alive"), ("cgroup", "killed"), ("off", "alive"), ("off", "killed")],
)
def test_down_stops_a_job_process_that_left_its_session_and_dropped_the_run_id(tmp_path, monkeypatch, containment, controller):
    if containment == "cgroup" and not _cgroup_v2_writable():
        pytest.skip("no writable cgroup v2 here")
    if containment == "off":
        monkeypatch.setenv("LAUNCHER_CGROUP_ROOT", "off")
    escape = DOUBLE_FORK if containment == "cgroup" else SINGLE_FORK
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)  # not ours: must survive
    started: list[int] = []
    try:
        proc, job, wrapper = _start(tmp_path, f"{escape}\nsleep 300")
        started += [job, wrapper]
        escapee = _escapee(tmp_path / "go")
        started.append(escapee)
        if controller == "killed":
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        (run,) = ledger_runs()
        r = run_cli("down", run.run_id, "--wait", "30")
        assert r.returncode == 0, r.stderr
        if controller == "alive":
            proc.wait(30)
        wait_for(lambda: pid_gone(escapee) and pid_gone(job), 15, what="the job and its escapee to be stopped")
        assert unrelated.poll() is None, "an unrelated process was killed"
        assert ledger_runs()[0].state == "cancelled"
        if containment == "cgroup":
            from launcher.executors.job_cgroup import cgroup_root

            assert not (cgroup_root() / run.run_id).exists()  # the run's cgroup is gone with it
    finally:
        unrelated.kill()
        unrelated.wait()
        for pid in started:  # what this test started, should it fail before `down` stopped it
            if not pid_gone(pid):
                os.kill(pid, signal.SIGKILL)


# ---- launcher doctor ------------------------------------------------------------------------------


def _doctor() -> dict[str, dict]:
    import json

    res = run_cli("doctor", "--json", timeout=120)
    assert "Traceback" not in res.stderr
    return {f["check"]: f for f in json.loads(res.stdout)}


def test_doctor_closes_an_ended_runs_attempt_as_its_job_ended(tmp_path):
    run_id = _orphan_then_exit(tmp_path, 75)
    with Ledger() as led:  # a failed multi-row write left the run ended with its attempt open
        led.set_run_state(run_id, "failed", reason="failed")
    found = _doctor()
    assert found["stuck-runs"]["status"] == "repaired" and "as preempted" in found["stuck-runs"]["detail"]
    assert [(a.end_reason, a.exit_code) for a in ledger_attempts(run_id)] == [("preempted", 75)]
    from launcher.executors.job_cgroup import cgroup_root

    root = cgroup_root()
    assert root is None or not (root / run_id).exists()  # no empty cgroup left behind


def test_doctor_stops_an_escapee_left_in_an_ended_runs_cgroup(tmp_path):
    if not _cgroup_v2_writable():
        pytest.skip("no writable cgroup v2 here")
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)
    started: list[int] = []
    try:
        proc, job, wrapper = _start(tmp_path, f'{DOUBLE_FORK}\nwhile [ ! -e "$FLAG-end" ]; do sleep 0.05; done\nexit 0')
        started += [job, wrapper]
        escapee = _escapee(tmp_path / "go")
        started.append(escapee)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        (tmp_path / "go-end").touch()  # the job ends while nobody watches; its escapee stays
        wait_for(lambda: pid_gone(job), 15, what="the job itself to end")
        assert not pid_gone(escapee)
        (run,) = ledger_runs()
        with Ledger() as led:
            led.set_run_state(run.run_id, "failed", reason="failed")
        found = _doctor()
        assert found["orphan-processes"]["status"] == "repaired", found
        wait_for(lambda: pid_gone(escapee), 15, what="doctor to stop the escapee")
        assert unrelated.poll() is None, "an unrelated process was killed"
    finally:
        unrelated.kill()
        unrelated.wait()
        for pid in started:
            if not pid_gone(pid):
                os.kill(pid, signal.SIGKILL)
