"""The local executor with `secrets:`: the job writes through a relay process that replaces the
values before they reach the log, and nothing else about the job changes (exit codes, the
preemption notice, live lines, a dead controller)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from launcher.executors import PREEMPTED_EXIT_CODE, Outcome
from launcher.executors.local import log_path
from tests.executors.test_local_executor import _request, _start

SECRET = "s3cr3t-Value-9"


def _wait_for_text(path: Path, needle: str, timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {needle!r} in {path}")


def test_secret_on_stdout_and_stderr_and_cut_across_writes_is_redacted_on_every_rank(tmp_path):
    script = textwrap.dedent(
        """\
        echo "rank $SKYPILOT_NODE_RANK token=$API_TOKEN"
        printf '%s' "${API_TOKEN:0:6}"; sleep 0.3; printf '%s\\n' "${API_TOKEN:6}"
        echo "oops $API_TOKEN" >&2
        echo "not secret: $PLAIN"
        """
    )
    req = _request(tmp_path, run=script, num_nodes=2, envs={"API_TOKEN": SECRET, "PLAIN": "abc"}, secrets=(SECRET,))
    result = _start(req).wait(30)
    assert result is not None and result.outcome is Outcome.SUCCEEDED, result
    for rank in (0, 1):
        assert log_path(req.run_dir, rank).read_text() == f"rank {rank} token=***\n***\noops ***\nnot secret: abc\n"


def test_exit_code_and_setup_phase_go_through_unchanged(tmp_path):
    req = _request(tmp_path, setup=f"echo setup {SECRET}", run=f"echo run {SECRET}; exit 3", secrets=(SECRET,))
    result = _start(req).wait(30)
    assert (result.outcome, result.exit_code, result.phase) == (Outcome.FAILED, 3, "run")
    assert log_path(req.run_dir, 0).read_text() == "setup ***\nrun ***\n"  # phases in order, each complete


def test_preemption_notice_reaches_the_job_and_its_last_lines_are_kept(tmp_path):
    script = textwrap.dedent(
        f"""\
        trap 'echo "saving with {SECRET}"; sleep 0.2; echo saved; exit {PREEMPTED_EXIT_CODE}' TERM
        echo ready
        while true; do sleep 0.05; done
        """
    )
    req = _request(tmp_path, run=script, secrets=(SECRET,))
    ex = _start(req)
    _wait_for_text(log_path(req.run_dir, 0), "ready\n")  # shown live, not at the end
    ex.notify_preemption(grace_s=10)
    result = ex.wait(30)
    assert (result.outcome, result.exit_code) == (Outcome.PREEMPTED, PREEMPTED_EXIT_CODE)
    lines = [ln for ln in log_path(req.run_dir, 0).read_text().splitlines() if ln != "Terminated"]  # bash on its sleep
    assert lines == ["ready", "saving with ***", "saved"]


def test_job_exiting_75_by_itself_is_preempted(tmp_path):
    req = _request(tmp_path, run=f"echo {SECRET}; exit {PREEMPTED_EXIT_CODE}", secrets=(SECRET,))
    result = _start(req).wait(30)
    assert (result.outcome, result.exit_code) == (Outcome.PREEMPTED, PREEMPTED_EXIT_CODE)


def test_the_secret_is_on_no_relay_command_line_nor_environment(tmp_path):
    req = _request(tmp_path, run="echo ready; sleep 30", secrets=(SECRET,))
    ex = _start(req)
    try:
        _wait_for_text(log_path(req.run_dir, 0), "ready\n")
        (relay,) = ex._relays
        cmdline = Path(f"/proc/{relay.pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{relay.pid}/environ").read_bytes()
        assert b"launcher.executors.log_relay" in cmdline
        assert SECRET.encode() not in cmdline and SECRET.encode() not in environ
        assert os.getsid(relay.pid) == relay.pid != os.getsid(ex.process_groups[0])  # a session of its own
    finally:
        ex.stop(grace_s=2)


def test_short_secrets_are_documented_as_not_redacted_and_need_no_relay(tmp_path):
    req = _request(tmp_path, run="echo pin=abc", secrets=("abc",))
    ex = _start(req)
    assert ex._relays == []
    assert ex.wait(30).ok
    assert log_path(req.run_dir, 0).read_text() == "pin=abc\n"


CONTROLLER = """
import sys, time
from pathlib import Path
from launcher.executors.local import LocalExecutor
from launcher.providers.base import ClusterRequest
from launcher.providers.local import LocalProvider
from tests.executors.test_local_executor import _request

req = _request(Path(sys.argv[1]), run=sys.argv[2], run_id=sys.argv[3], secrets=(sys.argv[4],))
provider = LocalProvider()
handle = provider.provision(ClusterRequest(cluster="c1", offer=provider.offer(), num_nodes=1, tags={}))
ex = LocalExecutor(podman=False).start(req, handle)
print(ex.process_groups[0], flush=True)
time.sleep(600)
"""


def test_killing_the_controller_loses_no_later_line_and_no_job(tmp_path):
    """The executor's process (a stand-in controller) is killed with -9 mid-run: the job keeps
    running, its later lines reach the log redacted, and it ends with its own exit code (no
    SIGPIPE: 141)."""
    script = textwrap.dedent(
        f"""\
        echo "before {SECRET}"
        while [ ! -e go ]; do sleep 0.05; done
        for i in 1 2 3; do echo "after $i {SECRET}"; done
        echo "$?" > exit-seen
        """
    )
    # The secret is in the stand-in's argv only because it is a test harness; the relay never sees it there.
    ctl = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(tmp_path), script, f"r-relay-{os.getpid()}", SECRET],
        stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]),
    )  # fmt: skip
    job_pgid = int(ctl.stdout.readline())
    log = log_path(tmp_path / "run", 0)
    _wait_for_text(log, "before ***\n")
    ctl.send_signal(signal.SIGKILL)
    ctl.wait(10)
    (tmp_path / "run" / "go").touch()
    text = _wait_for_text(log, "after 3")
    assert text == "before ***\nafter 1 ***\nafter 2 ***\nafter 3 ***\n"
    deadline = time.monotonic() + 10
    while not (tmp_path / "run" / "exit-seen").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (tmp_path / "run" / "exit-seen").read_text() == "0\n"  # the last echo was written, not SIGPIPEd
    try:
        os.killpg(job_pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_log_that_cannot_be_written_never_blocks_or_kills_the_job(tmp_path):
    """/dev/full fails every write with ENOSPC, like a full disk: the relay keeps draining the
    job's output, the job prints its 4 MiB and exits 0 (not 141, SIGPIPE)."""
    from launcher.executors.log_relay import job_output, wait_relays

    with job_output(Path("/dev/full"), [SECRET]) as (fd, relay):
        job = subprocess.Popen(["bash", "-c", "head -c 4194304 /dev/zero | tr '\\0' 'x'; echo; exit 0"], stdout=fd)
    assert job.wait(30) == 0
    assert wait_relays([relay], 10) and relay.returncode == 0


def test_after_failed_writes_the_log_says_how_much_was_lost(tmp_path):
    from launcher.executors.log_relay import _Sink

    full = os.open("/dev/full", os.O_WRONLY)
    sink = _Sink(full)
    sink.write(b"first\n")
    sink.write(b"second\n")
    assert sink.lost_bytes == 13
    log = tmp_path / "x.log"
    sink.fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # space again
    sink.write(b"third\n")
    os.close(full)
    os.close(sink.fd)
    assert log.read_text() == "\n[launcher] 13 bytes of output were lost (log write failed)\nthird\n"
