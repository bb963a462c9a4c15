"""The command daemon (`launcher daemon start` runs `python -m launcher.cli.daemon_server`).

It imports what commands need once (typer, pydantic, SQLAlchemy, our modules), then forks one
worker per command; the worker becomes the client's command (launcher.cli.daemon_client says
what it takes over) and runs it with `launcher.cli.main.run`, as the console entry point would.
The daemon itself runs no command: every worker starts from the same state, whatever the
commands before it did.

One daemon per LAUNCHER_HOME (a lock held for its life); its socket is private to the user and
a connection from another user id is closed unanswered. It answers a command only while the
code it imported is unchanged on disk (it stops itself when a file changed), and leaves after
`--idle-timeout-s` without commands. Stopping it (`launcher daemon stop`, SIGTERM) stops new
commands at once; running ones finish first. The daemon kills a worker with SIGKILL when the
worker's client goes away, as killing the CLI kills its command.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import gc
import importlib
import io
import os
import selectors
import signal
import socket
import struct
import sys
import time

from launcher import paths
from launcher.cli.argv import command_word
from launcher.cli.daemon_client import PROTOCOL, DaemonGone, code_root, recv_message, send_message
from launcher.errors import ExitCode

# What the commands users run often import, beyond the command modules: loaded once, here.
PRELOAD = (
    "launcher.cli.plain_params",
    "launcher.cli.render",
    "launcher.clusters.offers",
    "launcher.clusters.store",
    "launcher.config_file",
    "launcher.controller.launch_plan",
    "launcher.controller.logs",
    "launcher.controller.runner",
    "launcher.controller.simulated_preemptions",
    "launcher.controller.states",
    "launcher.environment",
    "launcher.executors.local",
    "launcher.ledger.rollup",
    "launcher.ledger.store",
    "launcher.planning.cloud_resources",
    "launcher.planning.declared",
    "launcher.planning.offers",
    "launcher.planning.planner",
    "launcher.planning.preflight",
    "launcher.providers.detect",
    "launcher.providers.local",
    "launcher.providers.registry",
    "launcher.server.settings",
    "launcher.spec.checkpoint_dir",
    "launcher.spec.workdir",
    "launcher.tracking.lineage",
    "launcher.tracking.session",
    "sqlalchemy.dialects.sqlite",
    "sqlite3",
    "typer._adapters",
    "typer._click.decorators",
)
REQUEST_TIMEOUT_S = 5.0  # a client sends its request as it connects; one that does not is dropped


def preload() -> None:
    from launcher.cli.main import COMMAND_MODULES

    for name in (*COMMAND_MODULES, *PRELOAD):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional library missing: the command imports (and reports) it itself
            pass


def code_fingerprint() -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every imported module's file: a change means the daemon runs old code."""
    out: dict[str, tuple[int, int]] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or path in out:
            continue
        try:
            st = os.stat(path)
        except OSError:
            out[path] = (-1, -1)
            continue
        out[path] = (st.st_mtime_ns, st.st_size)
    return out


class Daemon:
    def __init__(self, idle_timeout_s: float, lock_fd: int) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.lock_fd = lock_fd  # a worker closes it: a killed daemon's workers must not hold the lock
        self.started_at = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self.workers: dict[int, socket.socket] = {}
        self.stopping = False
        self.stop_signalled: str | None = None  # set in a signal handler, acted on in the loop
        self.fingerprint = code_fingerprint()
        self.root = code_root()
        self.sel = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.socket_ino: int | None = None
        self.wake_r, self.wake_w = os.pipe()

    # -- life ---------------------------------------------------------------------------------
    def bind(self) -> None:
        path = str(paths.daemon_socket())
        try:
            os.unlink(path)  # left by a daemon that was killed: the lock says none runs now
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(64)
        listener.setblocking(False)
        self.socket_ino = os.stat(path).st_ino
        self.listener = listener
        self.sel.register(listener, selectors.EVENT_READ, "accept")
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _: setattr(self, "stop_signalled", signal.Signals(signum).name))

    def stop(self, why: str) -> None:
        """No new commands from now on (the socket goes); the daemon exits once its workers end."""
        if self.stopping:
            return
        self.stopping = True
        log(f"stopping ({why}); {len(self.workers)} command(s) still running")
        if self.listener is not None:
            self.sel.unregister(self.listener)
            self.listener.close()
            self.listener = None
            path = paths.daemon_socket()
            try:
                if os.stat(path).st_ino == self.socket_ino:  # ours, not a newer daemon's
                    os.unlink(path)
            except FileNotFoundError:
                pass

    def serve(self) -> None:
        self.last_active = time.monotonic()  # idle from when it can first be reached
        while True:
            self.reap()
            if self.stop_signalled:
                self.stop(self.stop_signalled)
            if self.stopping and not self.workers:
                return
            idle_left = self.idle_timeout_s - (time.monotonic() - self.last_active)
            if not self.workers and idle_left <= 0:
                self.stop(f"idle for {self.idle_timeout_s:g} s")
                continue
            timeout = None if self.workers else max(idle_left, 0.0)
            for key, _ in self.sel.select(timeout):
                if key.data == "accept":
                    self.accept()
                elif key.data == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self.client_event(key.data, key.fileobj)

    # -- requests -----------------------------------------------------------------------------
    def accept(self) -> None:
        if self.listener is None:  # stopped by an earlier request of the same wake-up
            return
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(True)
        conn.settimeout(REQUEST_TIMEOUT_S)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            log(f"refused a connection from uid {uid}")
            conn.close()
            return
        fds: list[int] = []
        try:
            request, fds = recv_message(conn, max_fds=3)
            self.answer(conn, request, fds)
        except (OSError, DaemonGone, ValueError, KeyError, TypeError) as e:
            log(f"dropped a request: {type(e).__name__}: {e}")
            for fd in fds:
                os.close(fd)
            conn.close()

    def answer(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        op = request.get("op")
        if request.get("protocol") != PROTOCOL:
            self.reply_and_close(conn, {"fallback": f"protocol {request.get('protocol')} (daemon speaks {PROTOCOL})"}, fds)
        elif op == "status":
            self.reply_and_close(conn, self.status(), fds)
        elif op == "stop":
            self.reply_and_close(conn, {"stopping": True, "running": len(self.workers), "pid": os.getpid()}, fds)
            self.stop("asked")
        elif op == "run":
            why = self.cannot_serve(request, fds)
            if why:
                self.reply_and_close(conn, {"fallback": why}, fds)
            else:
                self.fork_worker(conn, request, fds)
        else:
            self.reply_and_close(conn, {"fallback": f"unknown op {op!r}"}, fds)

    def status(self) -> dict:
        return {
            "pid": os.getpid(), "started_at": self.started_at, "served": self.served, "running": len(self.workers),
            "idle_timeout_s": self.idle_timeout_s, "code_root": self.root, "executable": sys.executable,
            "stale": code_fingerprint() != self.fingerprint,
        }  # fmt: skip

    def cannot_serve(self, request: dict, fds: list[int]) -> str | None:
        """Why this daemon must not run the request (the client then runs it itself)."""
        if len(fds) != 3:
            return "stdin, stdout and stderr were not passed"
        if request["executable"] != sys.executable:
            return f"another interpreter ({request['executable']}; the daemon runs {sys.executable})"
        if request.get("code_root") != self.root:
            return f"another copy of the launcher ({request.get('code_root')}; the daemon runs {self.root})"
        if list(request["sys_path"])[1:] != sys.path[1:]:  # [0]: the script's own folder
            return "another sys.path (PYTHONPATH or a virtual environment differs)"
        if code_fingerprint() != self.fingerprint:
            self.stop("code changed on disk")
            return "the launcher's code changed since the daemon started (it stops now)"
        return None

    def reply_and_close(self, conn: socket.socket, message: dict, fds: list[int]) -> None:
        for fd in fds:
            os.close(fd)
        try:
            send_message(conn, message)
        except OSError:
            pass
        conn.close()

    def fork_worker(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        pid = os.fork()
        if pid == 0:
            self._become_worker(conn, request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        self.served += 1
        self.last_active = time.monotonic()
        log(f"command {command_word([str(a) for a in request['argv']])!r}: worker pid {pid}")
        try:
            send_message(conn, {"pid": pid})
        except OSError:  # the client is already gone
            os.kill(pid, signal.SIGKILL)
        conn.setblocking(False)
        self.workers[pid] = conn
        self.sel.register(conn, selectors.EVENT_READ, pid)

    def client_event(self, pid: int, conn: socket.socket) -> None:
        """The client sends nothing after its request: readable means it went away."""
        try:
            data = conn.recv(1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            return
        self.sel.unregister(conn)
        if pid in self.workers:
            log(f"client of worker {pid} went away: SIGKILL")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reap(self) -> None:
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says
            log(f"worker {pid} ended: exit {code}")
            self.last_active = time.monotonic()
            try:
                self.sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                conn.setblocking(True)
                conn.settimeout(1.0)
                send_message(conn, {"exit": code})
            except OSError:
                pass
            conn.close()

    # -- the worker ---------------------------------------------------------------------------
    def _become_worker(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        """The forked child: become the client's command. Its exit status goes back by the
        daemon's reap, after the worker has flushed everything it wrote."""
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for fd in (self.wake_r, self.wake_w, self.lock_fd):
                os.close(fd)
            if self.listener is not None:
                self.listener.close()
            for other in self.workers.values():
                other.close()
            self.sel.close()
            # `conn` stays open until the worker ends: if the daemon dies first, the client still
            # waits for the command (and forwards Ctrl-C) instead of leaving it behind.
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                if fd > 2:
                    os.close(fd)
            env = request["env"]
            _reopen_stdio(env)
            os.chdir(request["cwd"])
            os.umask(int(request["umask"]))
            os.environ.clear()
            os.environ.update(env)
            argv = [str(a) for a in request["argv"]]
            sys.argv = ["launcher", *argv]
            from launcher.cli.main import _exit, run

            code = run(argv, own_process=True)
        except BaseException as e:  # never back into the daemon's loop
            try:
                os.write(2, f"internal error in the command daemon's worker: {type(e).__name__}: {e}\n".encode())
            finally:
                os._exit(int(ExitCode.INTERNAL))
        # As the console entry point ends: os._exit after a quick command, else SystemExit and
        # the interpreter's own shutdown (threads joined, exit handlers, buffers flushed). The
        # daemon's frames below this one hold no `finally` or handler that would run in between.
        _exit(code)


def _reopen_stdio(env: dict[str, str]) -> None:
    """New sys.std* over the client's descriptors, buffered as Python would buffer them there."""
    encoding, _, errors = (env.get("PYTHONIOENCODING") or "").partition(":")
    encoding = encoding or "utf-8"
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))

    def text(fd: int, write: bool, errors_default: str, line: bool) -> io.TextIOWrapper:
        raw = io.open(fd, "wb" if write else "rb", buffering=0 if (write and unbuffered) else -1, closefd=False)
        return io.TextIOWrapper(raw, encoding=encoding, errors=errors or errors_default, line_buffering=line,
                                write_through=write and unbuffered)  # fmt: skip

    sys.stdin = sys.__stdin__ = text(0, False, "strict", False)
    sys.stdout = sys.__stdout__ = text(1, True, "strict", os.isatty(1))
    sys.stderr = sys.__stderr__ = text(2, True, "backslashreplace", True)


def log(text: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [daemon {os.getpid()}] {text}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.cli.daemon_server")
    ap.add_argument("--idle-timeout-s", type=float, default=3600.0)
    args = ap.parse_args(argv)
    # Not paths.make_state_private: it keeps the first umask it sees as the user's, and each
    # worker must record its client's.
    os.umask(0o077)
    paths.ensure_home()
    lock = os.open(paths.daemon_lock(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            log("another daemon already runs for this LAUNCHER_HOME")
            return int(ExitCode.CONFLICT)
        raise
    preload()
    daemon = Daemon(args.idle_timeout_s, lock)
    gc.freeze()  # what the imports made is never collected: workers do not walk (or copy) it
    daemon.bind()
    log(f"listening on {paths.daemon_socket()} (idle timeout {args.idle_timeout_s:g} s)")
    daemon.serve()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
