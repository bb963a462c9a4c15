"""The one place errors become exit codes: usage errors, LauncherErrors, bugs, typer.Exit."""

from __future__ import annotations

import pytest
import typer

from launcher.cli.app import app
from tests.cli_child import run
from launcher.errors import CredentialsError
from tests.conftest import run_cli


def test_unknown_option_is_a_usage_error_with_exit_2():
    r = run_cli("offers", "--bogus")
    assert r.returncode == 2
    assert "No such option: --bogus" in r.stderr and "Traceback" not in r.stderr


def test_bad_option_value_and_no_command():
    assert run_cli("offers", "--limit", "many").returncode == 2
    r = run_cli()
    assert r.returncode == 2 and "Usage: launcher" in (r.stdout + r.stderr)


def test_help_exits_0():
    r = run_cli("--help")
    assert r.returncode == 0 and "launch" in r.stdout


@pytest.fixture
def temp_command():
    """Register a throwaway command on the real app, removed afterwards."""
    added = []

    def add(fn):
        app.command(name=fn.__name__.replace("_", "-"))(fn)
        added.append(app.registered_commands[-1])
        return fn

    yield add
    for c in added:
        app.registered_commands.remove(c)


def test_launcher_error_maps_to_its_code_without_traceback(temp_command, capsys):
    @temp_command
    def t_creds() -> None:
        raise CredentialsError("no AWS credentials", hint="set AWS_PROFILE")

    assert run(["t-creds"]) == 4
    err = capsys.readouterr().err
    assert err == "error: no AWS credentials\n  set AWS_PROFILE\n"


def test_typer_exit_code_is_kept(temp_command):
    @temp_command
    def t_exit() -> None:
        raise typer.Exit(5)

    assert run(["t-exit"]) == 5


def test_a_bug_is_exit_70_and_traceback_only_with_debug(temp_command, capsys):
    @temp_command
    def t_bug() -> None:
        raise KeyError("oops")

    assert run(["t-bug"]) == 70
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "Traceback" not in err
    assert run(["--debug", "t-bug"]) == 70
    assert "Traceback" in capsys.readouterr().err
