"""The test harness's server start-up: a port someone else answers on is not taken for ours."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.conftest import wait_for_port


def test_a_listener_that_is_not_ours_is_not_accepted() -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            with pytest.raises(TimeoutError, match=f"not listening on port {port}"):
                wait_for_port(port, proc, timeout_s=1.0)
        finally:
            proc.kill()
            proc.wait()


def test_our_own_listener_is_accepted() -> None:
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        wait_for_port(port, proc, timeout_s=10.0)
    finally:
        proc.kill()
        proc.wait()
