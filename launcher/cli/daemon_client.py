"""The client half of the command daemon (`launcher daemon start`).

A command's own work is a small part of its time: most of a local `launch` is importing typer,
pydantic and SQLAlchemy. A running daemon has them imported; for each command it forks a worker
that takes this process's stdin/stdout/stderr (passed over the socket), environment, working
directory, umask and arguments, and runs the command exactly as `launcher.cli.main.run` would
here. This process waits for the worker's exit code and forwards the signals a terminal sends
(Ctrl-C) to it; if this process is killed, the daemon kills the worker with SIGKILL, as killing
the CLI would have killed the command. Without a daemon (or one that cannot serve this process:
other code, another interpreter or sys.path) the command runs in this process, as always.

Only the standard library, launcher.paths and launcher.cli.argv are imported here: this runs
before anything else in the console entry points (which import it only when the daemon's socket
exists), and what it does not import is its whole point.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

import launcher
from launcher import paths
from launcher.cli.argv import debug_requested

PROTOCOL = 1
# The daemon forks before it does anything else with a request: silence this long means it is
# stuck, and the command has not started.
REPLY_TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Linux's sockaddr_un holds 108 bytes, the terminating NUL included.
MAX_SOCKET_PATH_BYTES = 107
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Commands that always run in the calling process: the daemon's own controls.
NOT_SERVED = frozenset({"daemon"})


class DaemonGone(Exception):
    """The daemon closed the connection before the command's exit code came."""


def send_message(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    framed = struct.pack("!I", len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [framed], fds)
        framed = framed[sent:]
    if framed:
        sock.sendall(framed)


def _recv_exactly(sock: socket.socket, n: int, first: bytes = b"") -> bytes:
    buf = bytearray(first)
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise DaemonGone("connection closed mid-message")
        buf += chunk
    return bytes(buf)


def recv_message(sock: socket.socket, *, max_fds: int = 0) -> tuple[dict, list[int]]:
    """One framed JSON message (and the file descriptors sent with its first byte)."""
    fds: list[int] = []
    if max_fds:
        head, fds, flags, _ = socket.recv_fds(sock, 4, max_fds)
        if flags & socket.MSG_CTRUNC:
            for fd in fds:
                os.close(fd)
            raise DaemonGone("file descriptors truncated")
        if not head:
            raise DaemonGone("connection closed")
    else:
        head = sock.recv(4)
        if not head:
            raise DaemonGone("connection closed")
    try:
        (size,) = struct.unpack("!I", _recv_exactly(sock, 4, head))
        if size > MAX_MESSAGE_BYTES:
            raise DaemonGone(f"message of {size} bytes")
        message = json.loads(_recv_exactly(sock, size))
        if not isinstance(message, dict):
            raise DaemonGone("not a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


def connect(timeout_s: float = REPLY_TIMEOUT_S) -> socket.socket | None:
    """A connection to this LAUNCHER_HOME's daemon, or None when none is listening."""
    path = str(paths.daemon_socket())
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES or not os.path.exists(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(path)
    except OSError:  # refused: a socket file left by a daemon that was killed
        sock.close()
        return None
    return sock


def request(op: str, timeout_s: float = REPLY_TIMEOUT_S) -> dict | None:
    """Ask the daemon `op` (status, stop); None when no daemon answers."""
    sock = connect(timeout_s)
    if sock is None:
        return None
    try:
        send_message(sock, {"protocol": PROTOCOL, "op": op})
        return recv_message(sock)[0]
    except (OSError, DaemonGone):
        return None
    finally:
        sock.close()


def code_root() -> str:
    """The folder of the `launcher` package this process runs: client and daemon must agree."""
    return os.path.dirname(os.path.abspath(launcher.__file__))


def _std_fds_open() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def run_via_daemon(argv: list[str], command: str | None) -> int | None:
    """The command's exit code, run by the daemon's worker; None when it is to run here (no
    daemon, or one that cannot serve this process: it says why under LAUNCHER_DEBUG)."""
    if command in NOT_SERVED or not _std_fds_open():
        return None
    sock = connect()
    if sock is None:
        return None
    try:
        umask = os.umask(0o077)
        os.umask(umask)
        message = {
            "protocol": PROTOCOL, "op": "run", "argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
            "umask": umask, "executable": sys.executable, "sys_path": sys.path, "code_root": code_root(),
        }  # fmt: skip
        send_message(sock, message, fds=[0, 1, 2])
        reply, _ = recv_message(sock)
    except (OSError, DaemonGone) as e:  # nothing started: a cwd that was deleted, a daemon that died
        sock.close()
        _debug(argv, f"command daemon not used: {e}")
        return None
    except KeyboardInterrupt:  # Ctrl-C before the worker's pid came: closing makes the daemon kill it
        sock.close()
        sys.stderr.write("interrupted\n")
        from launcher.errors import ExitCode

        return int(ExitCode.INTERRUPTED)
    if "pid" not in reply:
        sock.close()
        _debug(argv, f"command daemon not used: {reply.get('fallback', reply)}")
        return None
    return _wait_for_worker(sock, int(reply["pid"]))


def _wait_for_worker(sock: socket.socket, pid: int) -> int:
    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)
    sock.settimeout(None)  # the command runs as long as it runs: a launch may take days
    try:
        reply, _ = recv_message(sock)
        return int(reply["exit"])
    except (OSError, DaemonGone, KeyError, ValueError):
        sys.stderr.write(
            f"error: the command daemon was stopped or killed while it ran this command (worker pid {pid}), so"
            " the command's exit status is lost; `launcher runs` shows what it did\n"
        )
        from launcher.errors import ExitCode

        return int(ExitCode.INTERNAL)
    finally:
        sock.close()


def _debug(argv: list[str], text: str) -> None:
    if debug_requested(argv):
        sys.stderr.write(text + "\n")
