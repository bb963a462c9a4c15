"""The real console entry point in a child process, one per call, without a fresh interpreter.

`run(argv)` forks the test process; the child sets `sys.argv`, calls `launcher.cli.main:main`
(what the installed `launcher` script runs when no command daemon is up) and exits with its status. The code a test
sees is the child's exit status as the kernel reports it; the output is what the child wrote to
its file descriptors 1 and 2, echoed into this process's sys.stdout / sys.stderr so pytest's
capsys reads it. Nothing the command does (globals, signal handlers, environment, open
ledgers) reaches the test process. A fork costs milliseconds where `python -m
launcher.cli.main` costs seconds of interpreter start and imports on a loaded machine; the
tests that run a fresh interpreter (`tests.conftest.run_cli`, the installed `launch` script)
cover import-time behaviour."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time

TIMEOUT_S = 120.0


def run(argv: list[str], timeout_s: float = TIMEOUT_S) -> int:
    """Exit status of `launcher ARGV` run in a forked child; its stdout/stderr are echoed here."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 70
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.argv = ["launcher", *map(str, argv)]
                from launcher.cli.main import main

                try:
                    main()
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                    if isinstance(e.code, str):
                        sys.stderr.write(e.code + "\n")
            except BaseException:  # a crash of the harness itself, not of the CLI's error handling
                import traceback

                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        status = _wait(pid, timeout_s, argv)
        for f, stream in ((out, sys.stdout), (err, sys.stderr)):
            f.seek(0)
            stream.write(f.read().decode("utf-8", errors="replace"))
    return os.waitstatus_to_exitcode(status)


def _wait(pid: int, timeout_s: float, argv) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"launcher {' '.join(map(str, argv))} still running after {timeout_s:g}s")
        time.sleep(0.005)
