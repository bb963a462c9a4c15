"""The command daemon (`launcher daemon start`) through the real entry point
(`python -m launcher.cli.entry`, what the console scripts run) and a real daemon process:
commands it serves behave as in their own process (output, exit codes, Ctrl-C, kill -9), and it
stands aside (the command runs in the client) when it would run other code."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cli.launch_helpers import clean_env, ledger_attempts, ledger_runs, pid_gone, wait_for, write_spec  # noqa: F401
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

TINY = """
name: tiny
resources: {cpus: 1}
run: echo "hi from $LAUNCHER_RUN_ID with $LC_MY_VAR${MY_VAR:+ and $MY_VAR}"
launcher: {project: t, expected_hours: 0.01}
"""
LONG = """
name: long
run: |
  echo "attempt $LAUNCHER_ATTEMPT pid $$"
  sleep 300
"""


def entry(*args: str, **kw) -> subprocess.CompletedProcess:
    """The console scripts' code path: asks the daemon first."""
    return subprocess.run([sys.executable, "-m", "launcher.cli.entry", *args], capture_output=True, text=True,
                          cwd=kw.pop("cwd", str(REPO)), env={**os.environ, **kw.pop("env", {})}, timeout=120, **kw)  # fmt: skip


def status() -> dict | None:
    r = run_cli("daemon", "status", "--json")
    return json.loads(r.stdout) if r.returncode == 0 else None


@pytest.fixture
def daemon(launcher_home):
    r = run_cli("daemon", "start")
    assert r.returncode == 0, r.stderr
    st = status()
    assert st is not None and st["served"] == 0
    yield st
    run_cli("daemon", "stop")
    try:
        os.kill(st["pid"], signal.SIGKILL)  # a test that failed midway: no daemon outlives it
    except ProcessLookupError:
        pass


def test_status_without_a_daemon_is_not_found_and_commands_run_in_their_own_process(launcher_home, tmp_path):
    r = run_cli("daemon", "status")
    assert r.returncode == 7 and "no command daemon" in r.stderr
    spec = write_spec(tmp_path, TINY)
    r = entry("launch", str(spec), "--yes")
    assert r.returncode == 0, r.stderr
    assert "hi from r-" in r.stdout


def test_a_launch_through_the_daemon_is_the_clients_command(daemon, launcher_home, tmp_path):
    workdir = tmp_path / "wd"
    workdir.mkdir()
    write_spec(workdir, TINY)
    # an allow-listed name (LC_*) reaches the job from the client; any other name stays out
    r = entry("launch", "task.yaml", "--yes", cwd=str(workdir), env={"LC_MY_VAR": "from-the-client", "MY_VAR": "not-for-jobs"})
    assert r.returncode == 0, r.stderr
    st = status()
    assert st["served"] == 1 and st["pid"] == daemon["pid"]  # the daemon ran it
    (run,) = ledger_runs()
    # the spec found in the client's working directory; the job's output on the client's stdout,
    # with the client's environment
    assert r.stdout == f"hi from {run.run_id} with from-the-client\n"
    assert "Plan for 'tiny'" in r.stderr and f"run {run.run_id}: succeeded" in r.stderr
    assert run.state == "succeeded"
    # the launcher program itself (`launcher`), and a JSON read command, go through it too
    r = entry("runs", "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["runs"][0]["run_id"] == run.run_id
    assert status()["served"] == 2


def test_files_for_the_user_follow_the_clients_umask(daemon, tmp_path):
    for umask, mode in (("027", 0o640), ("002", 0o664)):
        out = tmp_path / f"focus-{umask}.csv"
        p = subprocess.run(["bash", "-c", f'umask {umask} && exec "$0" -m launcher.cli.entry report focus -o {out}', sys.executable],
                           capture_output=True, text=True, cwd=str(REPO), timeout=120)  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert stat.S_IMODE(out.stat().st_mode) == mode
    assert status()["served"] == 2


def test_errors_and_exit_codes_come_back_unchanged(daemon, tmp_path):
    r = entry("launch", str(tmp_path / "nope.yaml"), "--yes")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    assert r.stderr == run_cli("launch", str(tmp_path / "nope.yaml"), "--yes").stderr  # word for word
    failing = write_spec(tmp_path, "name: f\nrun: exit 3\nlauncher: {expected_hours: 0.01}\n", "f.yaml")
    r = entry("launch", str(failing), "--yes")
    assert r.returncode == 1 and "job failed with exit code 3" in r.stderr
    r = entry("lanch", "x.yaml")
    assert r.returncode == 2 and "Did you mean 'launch'?" in r.stderr
    assert status()["served"] == 3
    assert ledger_runs()[0].state == "failed"


def test_ctrl_c_reaches_the_command_and_cancels_the_run(daemon, tmp_path):
    spec = write_spec(tmp_path, LONG)
    proc = subprocess.Popen([sys.executable, "-m", "launcher.cli.entry", "launch", str(spec), "--yes", "--grace-seconds", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))  # fmt: skip
    line = proc.stdout.readline()
    assert line.startswith("attempt 1 pid "), line
    job_pid = int(line.split()[-1])
    proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the client
    assert proc.wait(30) == 130
    assert "was cancelled" in proc.stderr.read()
    wait_for(lambda: pid_gone(job_pid), 10, what="job stopped by Ctrl-C")
    assert ledger_runs()[0].state == "cancelled"
    assert status()["running"] == 0


def test_kill_9_of_the_client_kills_its_command_as_it_would_in_process(daemon, tmp_path):
    spec = write_spec(tmp_path, LONG)
    proc = subprocess.Popen([sys.executable, "-m", "launcher.cli.entry", "launch", str(spec), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))  # fmt: skip
    line = proc.stdout.readline()
    job_pid = int(line.split()[-1])
    assert status()["running"] == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    wait_for(lambda: status()["running"] == 0, 10, what="the daemon to kill and reap the worker")
    assert not pid_gone(job_pid)  # as after kill -9 of the CLI: the job outlives its controller
    st = json.loads(run_cli("status", "--json").stdout)["runs"]
    assert st[0]["state"] == "running" and st[0]["controller"] == "orphaned"
    r = run_cli("down", st[0]["run_id"])  # and the next command repairs it
    assert r.returncode == 0, r.stderr
    wait_for(lambda: pid_gone(job_pid), 10, what="job to be killed")
    assert [a.end_reason for a in ledger_attempts(st[0]["run_id"])] == ["abandoned"]


def test_stop_lets_running_commands_finish_and_later_ones_run_in_their_own_process(daemon, tmp_path):
    go = tmp_path / "go"  # the job ends when the test says so: no race with the machine's speed
    spec = write_spec(tmp_path, f"name: s\nrun: while [ ! -e {go} ]; do sleep 0.05; done; echo done\nlauncher: {{expected_hours: 0.01}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "launcher.cli.entry", "launch", str(spec), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))  # fmt: skip
    wait_for(lambda: (status() or {}).get("running") == 1, 30, what="the command to start")
    r = run_cli("daemon", "stop")
    assert r.returncode == 0 and "exits when its 1 running command(s) end" in r.stderr
    assert status() is None  # no new commands: the socket is gone
    assert not pid_gone(daemon["pid"])  # but it waits for its running command
    go.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == "done\n", err
    wait_for(lambda: pid_gone(daemon["pid"]), 10, what="the daemon to exit after its last command")
    r = entry("runs", "list", "--json")  # no daemon: in the client's own process
    assert r.returncode == 0 and len(json.loads(r.stdout)["runs"]) == 1


def test_sigterm_stops_the_daemon_and_removes_its_socket(daemon, launcher_home):
    os.kill(daemon["pid"], signal.SIGTERM)
    wait_for(lambda: pid_gone(daemon["pid"]), 10, what="the daemon to exit on SIGTERM")
    assert not (launcher_home / "daemon.sock").exists()
    assert "stopping (SIGTERM)" in (launcher_home / "daemon.log").read_text()


def test_changed_code_on_disk_means_the_client_runs_it_itself_and_the_daemon_stops(daemon, tmp_path):
    module = REPO / "launcher" / "cli" / "daemon_cmd.py"  # imported by the daemon
    before = module.stat()
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        spec = write_spec(tmp_path, TINY)
        r = entry("--debug", "launch", str(spec), "--yes")
        assert r.returncode == 0, r.stderr
        assert "command daemon not used: the launcher's code changed" in r.stderr
        assert "hi from r-" in r.stdout
        wait_for(lambda: pid_gone(daemon["pid"]), 10, what="the stale daemon to exit")
    finally:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_another_sys_path_is_not_served(daemon, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    r = entry("--debug", "runs", "list", "--json", env={"PYTHONPATH": str(extra)})
    assert r.returncode == 0, r.stderr
    assert "command daemon not used: another sys.path" in r.stderr
    assert json.loads(r.stdout)["runs"] == []
    assert status()["served"] == 0


def test_its_files_are_private_and_a_second_daemon_is_refused(daemon, launcher_home):
    for name in ("daemon.sock", "daemon.log", "daemon.lock"):
        assert stat.S_IMODE((launcher_home / name).stat().st_mode) == 0o600, name
    again = run_cli("daemon", "start")
    assert again.returncode == 0 and f"already runs (pid {daemon['pid']})" in again.stderr
    second = subprocess.run([sys.executable, "-m", "launcher.cli.daemon_server"], capture_output=True, text=True,
                            timeout=60, cwd=str(REPO))  # fmt: skip
    assert second.returncode == 6 and "another daemon already runs" in second.stderr
    assert status()["pid"] == daemon["pid"]


ASK_STATUS = (
    "import socket, struct, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.settimeout(10)\n"
    "s.connect(sys.argv[1])\n"
    "body = b'{\"protocol\": 1, \"op\": \"status\"}'\n"
    "try:\n"
    "    s.sendall(struct.pack('!I', len(body)) + body)\n"
    "    print(repr(s.recv(65536)))\n"
    "except (BrokenPipeError, ConnectionResetError):  # closed before or after the request came\n"
    "    print(repr(b''))\n"
)


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to act as another user")
def test_a_connection_from_another_user_is_closed_unanswered(monkeypatch):
    # Only a user who loosened the modes lets another user reach the socket; the daemon still refuses.
    home = Path(tempfile.mkdtemp(prefix="daemon-peer-"))  # outside pytest's private tmp tree
    try:
        home.chmod(0o755)
        monkeypatch.setenv("LAUNCHER_HOME", str(home))
        r = run_cli("daemon", "start")
        assert r.returncode == 0, r.stderr
        sock = home / "daemon.sock"
        sock.chmod(0o666)
        as_me = subprocess.run([sys.executable, "-c", ASK_STATUS, str(sock)], capture_output=True, text=True, timeout=60)
        assert as_me.returncode == 0 and "served" in as_me.stdout
        other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", ASK_STATUS,
                                str(sock)], capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "b''"  # closed without a word
        assert "refused a connection from uid 65534" in (home / "daemon.log").read_text()
    finally:
        run_cli("daemon", "stop")
        shutil.rmtree(home, ignore_errors=True)


def test_it_leaves_when_idle(launcher_home):
    r = run_cli("daemon", "start", "--idle-timeout-minutes", "0.05")  # 3 s
    assert r.returncode == 0, r.stderr
    pid = int(re.search(r"started \(pid (\d+)\)", r.stderr).group(1))
    wait_for(lambda: pid_gone(pid), 30, what="the idle daemon to leave")
    assert not (launcher_home / "daemon.sock").exists()
    assert "stopping (idle for 3 s)" in (launcher_home / "daemon.log").read_text()


def test_a_socket_left_by_a_killed_daemon_is_harmless(daemon, launcher_home, tmp_path):
    os.kill(daemon["pid"], signal.SIGKILL)
    wait_for(lambda: pid_gone(daemon["pid"]), 10, what="the daemon to die")
    assert (launcher_home / "daemon.sock").exists()
    r = entry("runs", "list", "--json")  # connection refused: runs here
    assert r.returncode == 0, r.stderr
    r = run_cli("daemon", "start")  # replaces the dead daemon's socket
    assert r.returncode == 0, r.stderr
    assert status()["pid"] != daemon["pid"]
    run_cli("daemon", "stop")


def test_a_big_log_is_kept_once_when_a_daemon_starts(launcher_home):
    (launcher_home / "daemon.log").write_text("x" * (2 << 20))
    r = run_cli("daemon", "start")
    assert r.returncode == 0, r.stderr
    try:
        assert (launcher_home / "daemon.log.1").stat().st_size == 2 << 20
        assert (launcher_home / "daemon.log").stat().st_size < 4096
    finally:
        run_cli("daemon", "stop")


def test_a_new_daemon_starts_while_a_killed_daemons_worker_still_runs(daemon, tmp_path):
    spec = write_spec(tmp_path, LONG)
    proc = subprocess.Popen([sys.executable, "-m", "launcher.cli.entry", "launch", str(spec), "--yes", "--grace-seconds", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))  # fmt: skip
    assert proc.stdout.readline().startswith("attempt 1 pid ")
    os.kill(daemon["pid"], signal.SIGKILL)
    wait_for(lambda: pid_gone(daemon["pid"]), 10, what="the daemon to die")
    try:
        r = run_cli("daemon", "start")  # the running worker holds nothing of the old daemon's
        assert r.returncode == 0, r.stderr
        assert status()["pid"] != daemon["pid"]
    finally:
        proc.send_signal(signal.SIGINT)  # the client waited for its command, and forwards Ctrl-C to it
        out, err = proc.communicate(timeout=30)
        run_cli("daemon", "stop")
    assert proc.returncode == 70 and "the command's exit status is lost" in err
    assert ledger_runs()[0].state == "cancelled"


@pytest.mark.parametrize("minutes", ["0", "-1", "nan"])
def test_an_idle_timeout_that_is_not_above_zero_is_bad_input(launcher_home, minutes):
    r = run_cli("daemon", "start", "--idle-timeout-minutes", minutes)
    assert r.returncode == 2 and "--idle-timeout-minutes must be above 0" in r.stderr and "Traceback" not in r.stderr
    assert list(launcher_home.iterdir()) == []  # nothing started or written


def test_a_too_long_home_is_refused_with_a_clear_error(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 120)
    monkeypatch.setenv("LAUNCHER_HOME", str(deep))
    r = run_cli("daemon", "start")
    assert r.returncode == 2 and "longer than a Unix socket allows" in r.stderr
    assert not deep.exists()  # nothing written on bad input


PRELOADED = (
    "import sys, threading\n"
    "from launcher.cli import daemon_server\n"
    "daemon_server.preload()\n"
    "assert threading.active_count() == 1  # forking is safe: no thread started at import\n"
    "from launcher.cli.main import run\n"
    "before = set(sys.modules)\n"
    "assert run(['launch', sys.argv[1], '--yes'], own_process=False) == 0\n"
    "print(' '.join(sorted(set(sys.modules) - before)))\n"
)


def test_the_daemon_preloads_what_a_warm_local_launch_imports(launcher_home, tmp_path):
    spec = write_spec(tmp_path, TINY)
    assert run_cli("launch", str(spec), "--yes").returncode == 0  # the ledger exists: a warm launch
    p = subprocess.run([sys.executable, "-c", PRELOADED, str(spec)], capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    heavy = [m for m in p.stdout.split() if m.split(".")[0] in ("launcher", "pricing", "sqlalchemy", "pydantic", "typer", "yaml")]
    assert heavy == []
