"""`launcher CMD` imports only CMD's modules (main.COMMAND_HOMES); what each registers must be
the whole of CMD, as when every module is loaded for `launcher --help`."""

import json
import subprocess
import sys

import pytest

from launcher.cli.main import COMMAND_HOMES, COMMAND_MODULES
from tests.conftest import REPO, run_cli

TREE = (
    "import importlib, json, sys\n"
    "import typer.main\n"
    "from launcher.cli.app import app\n"
    "for name in sys.argv[1:]:\n"
    "    importlib.import_module(name)\n"
    "def walk(cmd, path):\n"
    "    out = [path]\n"
    "    for sub in sorted(getattr(cmd, 'commands', {})):\n"
    "        out += walk(cmd.commands[sub], path + ' ' + sub)\n"
    "    return out\n"
    "print(json.dumps(walk(typer.main.get_command(app), 'launcher')))\n"
)


def _tree(modules) -> list[str]:
    p = subprocess.run([sys.executable, "-c", TREE, *modules], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def full_tree() -> list[str]:
    return _tree(COMMAND_MODULES)


def test_every_command_has_its_home(full_tree):
    top = {p.split()[1] for p in full_tree if len(p.split()) == 2}
    assert top == set(COMMAND_HOMES)
    assert {m for homes in COMMAND_HOMES.values() for m in homes} == set(COMMAND_MODULES)


@pytest.mark.parametrize("command", sorted(COMMAND_HOMES))
def test_a_commands_home_registers_all_of_it(full_tree, command):
    mine = [p for p in full_tree if p.split()[1:2] == [command]]
    got = [p for p in _tree(COMMAND_HOMES[command]) if p.split()[1:2] == [command]]
    assert got == mine


def test_help_lists_every_command_and_a_typo_gets_its_suggestion():
    h = run_cli("--help")
    assert h.returncode == 0
    listed = {line.split()[0] for line in h.stdout.split("Commands:")[1].splitlines() if line.startswith("  ")}
    assert listed == set(COMMAND_HOMES)
    t = run_cli("--debug", "lanch", "x.yaml")
    assert t.returncode == 2 and "Did you mean 'launch'?" in t.stderr
    sub = run_cli("runs", "--help")  # `runs diff` lives in a module of its own
    assert sub.returncode == 0 and " diff " in sub.stdout and " show " in sub.stdout
