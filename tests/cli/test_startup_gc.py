"""The collector is off for a quick command run in its own process, untouched for other commands
and for in-process callers, and on again (startup's objects frozen) once a long-running part
releases it. A quick command skips pydantic's plugin search and the interpreter's teardown, and
still runs every exit handler and flushes its output."""

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
    startup_gc._holding[0] = startup_gc._quick[0] = False
    yield
    startup_gc._holding[0] = startup_gc._quick[0] = False
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


EXIT_PROBE = (
    "import atexit, sys, threading, time\n"
    "from launcher.cli import main, startup_gc\n"
    "startup_gc.hold(sys.argv[1])\n"
    "mark = sys.argv[2]\n"
    "atexit.register(lambda: open(mark, 'a').write('exit-handler;'))\n"
    "if sys.argv[3] == 'thread':  # a non-daemon thread: the interpreter waits for it to finish\n"
    "    threading.Thread(target=lambda: (time.sleep(0.3), open(mark, 'a').write('thread;'))).start()\n"
    "sys.stdout.write('x' * 200000)  # more than a pipe holds: the flush must happen before exit\n"
    "main._exit(3)\n"
)


@pytest.mark.parametrize(("command", "thread"), [("launch", "none"), ("launch", "thread"), ("report", "none")])
def test_exit_runs_handlers_flushes_and_waits_for_threads(tmp_path, command, thread):
    mark = tmp_path / "mark"
    p = subprocess.run([sys.executable, "-c", EXIT_PROBE, command, str(mark), thread], capture_output=True, text=True,
                       cwd=REPO, timeout=60)  # fmt: skip
    assert p.returncode == 3, p.stderr[-2000:]
    assert p.stdout == "x" * 200000
    assert mark.read_text() == ("thread;exit-handler;" if thread == "thread" else "exit-handler;")


PLUGIN_PROBE = (
    "import sys\n"
    "from launcher.cli import startup_gc\n"
    "from pydantic.plugin import _loader\n"
    "startup_gc.skip_pydantic_plugins(sys.argv[1])\n"
    "import os\n"
    "print(repr(_loader._plugins), 'PYDANTIC_DISABLE_PLUGINS' in os.environ)\n"
)


@pytest.mark.parametrize(("command", "user_env", "expected"), [
    ("launch", None, "{} False"),  # searched for none, and nothing left in the environment
    ("offers", None, "{} False"),
    ("report", None, "None False"),  # other commands: pydantic's own handling
    ("launch", "", "None True"),  # the user chose: left to pydantic
])  # fmt: skip
def test_quick_commands_skip_the_pydantic_plugin_search_in_their_process_only(command, user_env, expected):
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if user_env is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = user_env
    p = subprocess.run([sys.executable, "-c", PLUGIN_PROBE, command], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == expected


def test_a_launched_job_does_not_inherit_a_plugin_switch(tmp_path):
    spec = tmp_path / "t.yaml"
    spec.write_text('name: t\nresources: {cpus: 1}\nrun: echo "switch=${PYDANTIC_DISABLE_PLUGINS-unset}"\n')
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env.update(LAUNCHER_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "launcher.cli.main", "launch", str(spec), "--yes"], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "switch=unset" in p.stdout.splitlines()
