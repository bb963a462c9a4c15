"""A job's output on its way to its log file, with the spec's secrets replaced (local executor).

    python -m launcher.executors.log_relay --secrets-fd N  < job's output pipe  > log file

When a task declares `secrets:`, the local executor gives each rank's job the write end of a pipe
as stdout and stderr; the read end is a relay's stdin and the relay's stdout is the rank's log
file (opened for appending by the executor, as it is when the job writes to it directly). The
secret values arrive as a JSON list on the inherited descriptor N, never on the command line
(any local user can read argv in /proc); the relay reads it to the end first.

Lifetime: the relay runs in a session of its own, so neither a terminal's signals nor the
signals the executor sends to the job's process group (preemption notice, stop) reach it, and it
ignores SIGINT, SIGHUP and SIGTERM. It ends when the last process holding the pipe's write end
(the job and anything it started) has exited: a controller killed with -9 loses no line, and the
job never gets SIGPIPE from its log. Each chunk is written as soon as it is read (only a tail that
may be the beginning of a secret is held back; see redaction.py). A failed write (disk full)
drops that output and says how much in the log once writing works again; the job is never
blocked by its log.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from launcher.errors import ProviderError
from launcher.executors.redaction import StreamRedactor, secret_patterns

CHUNK_BYTES = 1 << 16
PIPE_BYTES = 1 << 20  # room for a burst of output while the relay starts (Linux F_SETPIPE_SZ)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, CHUNK_BYTES):
        parts.append(chunk)
    return b"".join(parts)


class _Sink:
    """Writes to the log, counting what could not be written until a write works again."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lost_bytes = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        try:
            if self.lost_bytes:
                write_all(self.fd, f"\n[launcher] {self.lost_bytes} bytes of output were lost (log write failed)\n".encode())
                self.lost_bytes = 0
            write_all(self.fd, data)
        except OSError:
            self.lost_bytes += len(data)


def relay(in_fd: int, out_fd: int, redactor: StreamRedactor) -> None:
    sink = _Sink(out_fd)
    while chunk := os.read(in_fd, CHUNK_BYTES):
        sink.write(redactor.feed(chunk))
    sink.write(redactor.close())


def main(argv: Sequence[str] | None = None) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    import argparse  # here: the executor imports this module for every job

    parser = argparse.ArgumentParser(prog="log_relay")
    parser.add_argument("--secrets-fd", type=int, required=True)
    args = parser.parse_args(argv)
    values = json.loads(_read_all(args.secrets_fd) or b"[]")
    os.close(args.secrets_fd)
    relay(sys.stdin.fileno(), sys.stdout.fileno(), StreamRedactor(secret_patterns(values)))
    return 0


# ---- the executor's side ------------------------------------------------------------------------
def _relay_env() -> dict[str, str]:
    # Not one of the run's processes: the sweep for LAUNCHER_RUN_ID after a crash must not stop it.
    return {k: v for k, v in os.environ.items() if k != "LAUNCHER_RUN_ID"}


def _start_relay(read_end: int, out, secrets: Sequence[str]) -> subprocess.Popen:
    secrets_read, secrets_write = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher.executors.log_relay", "--secrets-fd", str(secrets_read)],
            stdin=read_end, stdout=out, stderr=out, pass_fds=(secrets_read,), env=_relay_env(),
            start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(secrets_read)
    try:
        write_all(secrets_write, json.dumps(list(secrets)).encode())
    except OSError as e:  # it died before reading them: the job must not start writing into nothing
        proc.kill()
        proc.wait()
        raise ProviderError(f"the log relay did not start (exit {proc.returncode}): {e.strerror}") from None
    finally:
        os.close(secrets_write)
    return proc


@contextlib.contextmanager
def job_output(log: Path, secrets: Sequence[str]) -> Iterator[tuple[int, subprocess.Popen | None]]:
    """The descriptor to give a job as stdout and stderr, and its relay process: the log file
    itself (relay None) when no secret is long enough to redact, else a pipe to a relay. The
    caller starts the job inside the `with`; the executor's copies are closed on leaving it."""
    with open(log, "ab", buffering=0) as out:
        if not secret_patterns(secrets):
            yield out.fileno(), None
            return
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_end, _F_SETPIPE_SZ, PIPE_BYTES)
        try:
            proc = _start_relay(read_end, out, secrets)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        try:
            yield write_end, proc
        finally:
            os.close(write_end)


def wait_relays(procs: Sequence[subprocess.Popen], timeout_s: float) -> bool:
    """Wait for relays to write their last bytes (they end once the job's processes are gone).
    False when one is still running at the deadline: something the job started holds its output
    open; that relay goes on and ends with it."""
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
