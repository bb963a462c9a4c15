"""Entry points: `launcher` and `launch` (exactly `launcher launch`).

One place catches LauncherError (and the pricing/infra libraries' errors, mapped by
`launcher.errors.as_launcher_error`) and turns it into an exit code; tracebacks only with --debug.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
import threading
import traceback
from typing import NoReturn

import typer

from launcher.cli import startup_gc
from launcher.cli.app import GLOBALS, app
from launcher.cli.argv import debug_requested, hoist_global_options

try:  # typer >= 0.20 vendors click; its usage errors are raised from there
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer on the real click
    from click import ClickException
from launcher.errors import ExitCode, LauncherError, as_launcher_error, library_error_types

# Each module registers its commands on `app` at import; they must stay light to import. The
# order here is the order of `launcher --help`.
COMMAND_MODULES = (
    "launcher.cli.offers_cmd",
    "launcher.cli.catalog_cmd",
    "launcher.cli.launch_cmd",
    "launcher.cli.runs_cmd",
    "launcher.cli.simulate_cmd",
    "launcher.cli.infra_cmd",
    "launcher.cli.reap_cmd",
    "launcher.cli.report_cmd",
    "launcher.cli.doctor_cmd",
    "launcher.cli.reproduce_cmd",
    "launcher.cli.runs_diff_cmd",
    "launcher.cli.server_cmd",
    "launcher.cli.metrics_cmd",
    "launcher.cli.infra_server_cmd",
    "launcher.cli.clusters_cmd",
    "launcher.cli.daemon_cmd",
)
# Top-level command -> the modules that register it and its subcommands: `launcher launch ...`
# imports launch_cmd alone. tests/cli/test_lazy_commands.py checks this against COMMAND_MODULES.
COMMAND_HOMES: dict[str, tuple[str, ...]] = {
    "offers": ("launcher.cli.offers_cmd",),
    "catalog": ("launcher.cli.catalog_cmd",),
    "launch": ("launcher.cli.launch_cmd",),
    "runs": ("launcher.cli.runs_cmd", "launcher.cli.runs_diff_cmd"),
    "status": ("launcher.cli.runs_cmd",),
    "logs": ("launcher.cli.runs_cmd",),
    "down": ("launcher.cli.runs_cmd",),
    "simulate": ("launcher.cli.simulate_cmd",),
    "infra": ("launcher.cli.infra_cmd", "launcher.cli.infra_server_cmd"),
    "reap": ("launcher.cli.reap_cmd",),
    "report": ("launcher.cli.report_cmd",),
    "budget": ("launcher.cli.report_cmd",),
    "doctor": ("launcher.cli.doctor_cmd",),
    "reproduce": ("launcher.cli.reproduce_cmd",),
    "server": ("launcher.cli.server_cmd",),
    "metrics": ("launcher.cli.metrics_cmd",),
    "clusters": ("launcher.cli.clusters_cmd",),
    "daemon": ("launcher.cli.daemon_cmd",),
}


def load_commands(argv: list[str]) -> str | None:
    """Import the modules of the command `argv` names (global options first, as
    hoist_global_options leaves them); every module when it names none or one we do not know
    (`--help`, a typo that wants its did-you-mean). Returns the command's name, if any."""
    from launcher.cli.argv import command_index

    i = command_index(argv)
    if "--version" in argv[:i]:  # eager: prints and exits before any command
        return None
    word = argv[i] if i < len(argv) else None
    modules = COMMAND_HOMES.get(word, COMMAND_MODULES) if word is not None else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name)
    return word


def run(argv: list[str], *, own_process: bool = False) -> int:
    """Run one command. `own_process`: the process ends with it (the console entry points), so
    a quick command may run without the cyclic GC (launcher.cli.startup_gc)."""
    from launcher import paths

    paths.make_state_private()
    argv = hoist_global_options(argv)
    command = load_commands(argv)  # builds no pydantic model: the plugin search is still ahead
    if command in startup_gc.QUICK_COMMANDS:
        from launcher.cli import plain_params

        plain_params.install()
    if own_process:
        startup_gc.skip_pydantic_plugins(command)
        startup_gc.hold(command)
    try:
        rv = app(args=argv, prog_name="launcher", standalone_mode=False)
        # Without standalone mode typer returns a `typer.Exit`'s code instead of raising it;
        # our commands themselves return None.
        return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except (LauncherError, *library_error_types()) as raised:
        return _expected(as_launcher_error(raised), argv)
    except typer.Exit as e:
        return int(e.exit_code or 0)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return int(ExitCode.INTERRUPTED)
    except ClickException as e:  # unknown option, missing argument, bad value: usage errors
        e.show()
        return int(ExitCode.BAD_INPUT)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except OSError as e:  # a full disk or a permission denied is the machine's state, not a bug
        from launcher.errors import from_os_error

        known = from_os_error(e, state_home=paths.home())
        return _internal(e, argv) if known is None else _expected(known, argv)
    except Exception as e:  # a bug: say so briefly unless --debug
        return _internal(e, argv)


def _expected(e: LauncherError, argv: list[str]) -> int:
    if GLOBALS.debug or debug_requested(argv):
        traceback.print_exc()
    sys.stderr.write(f"error: {e.message}\n")
    if e.hint:
        sys.stderr.write(f"  {e.hint}\n")
    return int(e.exit_code)


def _internal(e: Exception, argv: list[str]) -> int:
    if GLOBALS.debug or debug_requested(argv):
        traceback.print_exc()
    else:
        sys.stderr.write(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)\n")
    return int(ExitCode.INTERNAL)


def _exit(code: int) -> NoReturn:
    # The interpreter's last cyclic collections at exit would walk every object the imports made
    # (SQLAlchemy, pydantic, typer: ~0.1 s of CPU, a fifth of a local launch) to free memory the
    # exit frees anyway. Frozen objects are skipped; nothing is left running by now.
    gc.freeze()
    if startup_gc.quick_process() and threading.active_count() == 1:
        # A quick command with nothing else running: after the exit handlers and the flush of
        # stdout/stderr, the teardown of every module (tens of ms here) has nothing left to do.
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: the reader went away
                pass
        os._exit(code)
    sys.exit(code)


def main() -> None:
    _exit(run(sys.argv[1:], own_process=True))


if __name__ == "__main__":
    main()
