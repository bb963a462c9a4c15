"""The console entry points `launcher` and `launch`: a running command daemon
(`launcher daemon start`) runs the command warm; otherwise it runs here.

This module imports only what asking the daemon needs, and that only when its socket exists. `python -m launcher.cli.main` always
runs in its own process (the tests use it; they never depend on a daemon).
"""

from __future__ import annotations

import os
import sys

from launcher import paths
from launcher.cli.argv import command_word, hoist_global_options, launch_argv


def _dispatch(argv: list[str]) -> None:
    if os.path.exists(paths.daemon_socket()):  # no daemon, no socket module or protocol to load
        from launcher.cli.daemon_client import run_via_daemon

        code = run_via_daemon(argv, command_word(hoist_global_options(argv)))
        if code is not None:
            sys.exit(code)
    from launcher.cli.main import _exit, run

    _exit(run(argv, own_process=True))


def main() -> None:
    _dispatch(sys.argv[1:])


def launch_main() -> None:
    """`launch ARGS` is exactly `launcher launch ARGS` (global options may come first)."""
    _dispatch(launch_argv(sys.argv[1:]))


if __name__ == "__main__":
    main()
