"""`launcher daemon start|status|stop`: the per-user command daemon that keeps the libraries
imported so that `launch` and `launcher` start warm (launcher.cli.daemon_server)."""

from __future__ import annotations

import typer

from launcher.cli.app import app

daemon_app = typer.Typer(
    help="A warm process per LAUNCHER_HOME that runs `launch` and `launcher` commands without re-importing the libraries.",
    no_args_is_help=True,
)
app.add_typer(daemon_app, name="daemon")

START_TIMEOUT_S = 60.0  # importing everything takes ~1 s here; a loaded machine, much more
STOP_TIMEOUT_S = 10.0
LOG_KEEP_BYTES = 1 << 20


@daemon_app.command("start")
def daemon_start(
    idle_timeout_minutes: float = typer.Option(60.0, "--idle-timeout-minutes", help="Stop after this long without commands (> 0)."),
) -> None:
    """Start the daemon for this LAUNCHER_HOME (nothing to do when one runs)."""
    import os
    import subprocess
    import sys
    import time

    from launcher import paths
    from launcher.cli import daemon_client
    from launcher.cli.render import info
    from launcher.errors import BadInputError, ProviderError

    if not idle_timeout_minutes > 0:  # also NaN
        raise BadInputError(f"--idle-timeout-minutes must be above 0, got {idle_timeout_minutes:g}",
                            hint="e.g. --idle-timeout-minutes 60; `launcher daemon stop` stops it any time")  # fmt: skip
    sock = str(paths.daemon_socket())
    if len(os.fsencode(sock)) > daemon_client.MAX_SOCKET_PATH_BYTES:
        raise BadInputError(
            f"the daemon's socket path {sock} is {len(os.fsencode(sock))} bytes, longer than a Unix socket allows "
            f"({daemon_client.MAX_SOCKET_PATH_BYTES})",
            hint="set LAUNCHER_HOME to a shorter path",
        )
    running = daemon_client.request("status")
    if running is not None and "pid" in running:
        info(f"the command daemon already runs (pid {running['pid']})")
        return
    paths.ensure_home()
    try:  # two lines per command: keep the previous log once, not every log ever
        if paths.daemon_log().stat().st_size > LOG_KEEP_BYTES:
            os.replace(paths.daemon_log(), paths.daemon_log().with_name("daemon.log.1"))
    except FileNotFoundError:
        pass
    log = os.open(paths.daemon_log(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher.cli.daemon_server", "--idle-timeout-s", str(idle_timeout_minutes * 60)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )  # fmt: skip
    finally:
        os.close(log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        status = daemon_client.request("status", timeout_s=2.0)
        if status is not None and "pid" in status:
            info(f"command daemon started (pid {status['pid']}); `launch` and `launcher` now start warm; "
                 f"it stops after {idle_timeout_minutes:g} min without commands, or with `launcher daemon stop`")  # fmt: skip
            return
        if proc.poll() is not None:
            raise ProviderError(
                f"the command daemon exited at start (exit {proc.returncode})", hint=f"see {paths.daemon_log()}"
            )
        time.sleep(0.05)
    proc.kill()
    raise ProviderError(f"the command daemon did not answer within {START_TIMEOUT_S:g} s; stopped it",
                        hint=f"see {paths.daemon_log()}")  # fmt: skip


@daemon_app.command("status")
def daemon_status(as_json: bool = typer.Option(False, "--json", help="As one JSON object.")) -> None:
    """Whether a daemon runs for this LAUNCHER_HOME, and what it has served. Exit 7 when none."""
    import time

    from launcher.cli import daemon_client
    from launcher.cli.render import info, print_json
    from launcher.errors import NotFoundError

    status = daemon_client.request("status")
    if status is None or "pid" not in status:
        raise NotFoundError("no command daemon runs for this LAUNCHER_HOME", hint="launcher daemon start")
    if as_json:
        print_json(status)
        return
    up_min = (time.time() - float(status["started_at"])) / 60
    info(f"command daemon pid {status['pid']}: up {up_min:.1f} min, {status['served']} command(s) served, "
         f"{status['running']} running; idle timeout {float(status['idle_timeout_s']) / 60:g} min")  # fmt: skip
    if status.get("stale"):
        info("  the launcher's code changed on disk since it started: it stops at the next command")


@daemon_app.command("stop")
def daemon_stop() -> None:
    """Stop the daemon: no new commands from now; those running finish first."""
    import time

    from launcher import procfs
    from launcher.cli import daemon_client
    from launcher.cli.render import info
    from launcher.errors import ProviderError

    reply = daemon_client.request("stop")
    if reply is None or "pid" not in reply:
        info("no command daemon runs for this LAUNCHER_HOME")
        return
    pid, running = int(reply["pid"]), int(reply["running"])
    if running:
        info(f"command daemon {pid} takes no new commands; it exits when its {running} running command(s) end")
        return
    started = procfs.process_start_ticks(pid)  # read once: a recycled pid is not the daemon
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not procfs.running_since(pid, started):
            info(f"command daemon {pid} stopped")
            return
        time.sleep(0.05)
    raise ProviderError(f"command daemon {pid} did not exit within {STOP_TIMEOUT_S:g} s", hint=f"kill {pid}")

