"""The collector is off for a quick command run in its own process, untouched for other commands
and for in-process callers, and on again (startup's objects frozen) once a long-running part
releases it."""

import gc
import os
import subprocess
import sys

import pytest

from launcher.cli import startup_gc
from tests.conftest import REPO


@pytest.fixture(autouse=True)
def _gc_on():
    gc.enable()
    startup_gc._holding[0] = False
    yield
    startup_gc._holding[0] = False
    gc.enable()


@pytest.mark.parametrize("command", sorted(startup_gc.QUICK_COMMANDS))
def test_quick_commands_hold_gc_until_released(command):
    frozen_before = gc.get_freeze_count()
    startup_gc.hold(command)
    assert not gc.isenabled()
    try:
        startup_gc.release()
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen_before  # startup's objects are never walked again
    finally:
        gc.unfreeze()


def test_other_commands_keep_gc():
    for command in ("server", "report", "runs", None):
        startup_gc.hold(command)
        assert gc.isenabled()


def test_release_is_a_no_op_unless_held():
    gc.disable()
    try:
        startup_gc.release()
        assert not gc.isenabled()  # someone else's choice is left alone
    finally:
        gc.enable()


PROBE = (
    "import gc, sys\n"
    "from launcher.cli.main import run\n"
    "rc = run(sys.argv[2:], own_process=sys.argv[1] == 'own')\n"
    "print('RC', rc, 'GC', gc.isenabled(), file=sys.stderr)\n"
)


@pytest.mark.parametrize(("mode", "gc_after"), [("own", False), ("in-process", True)])
def test_offers_runs_without_gc_only_in_its_own_process(tmp_path, mode, gc_after):
    env = {**os.environ, "LAUNCHER_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-c", PROBE, mode, "offers", "--gpus", "H100:8", "--json"], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1] == f"RC 0 GC {gc_after}"
    assert p.stdout.lstrip().startswith("[")
