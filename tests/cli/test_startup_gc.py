"""The collector is off while a quick command runs, back as it was afterwards, and on (with
startup's objects frozen) once a long-running part releases it."""

import gc

import pytest

from launcher.cli import startup_gc


@pytest.fixture(autouse=True)
def _gc_on():
    gc.enable()
    yield
    gc.enable()


@pytest.mark.parametrize("command", sorted(startup_gc.QUICK_COMMANDS))
def test_quick_commands_run_without_gc_and_restore_it(command):
    with startup_gc.held(command):
        assert not gc.isenabled()
    assert gc.isenabled()


def test_other_commands_keep_gc():
    for command in ("server", "report", None):
        with startup_gc.held(command):
            assert gc.isenabled()


def test_restored_when_the_command_fails():
    with pytest.raises(RuntimeError), startup_gc.held("launch"):
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_release_turns_it_on_and_freezes_startup_objects():
    frozen_before = gc.get_freeze_count()
    marker = [object() for _ in range(100)]
    try:
        with startup_gc.held("launch"):
            startup_gc.release()
            assert gc.isenabled()
            assert gc.get_freeze_count() >= frozen_before + len(marker)
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_release_is_a_no_op_unless_held():
    gc.disable()
    try:
        startup_gc.release()
        assert not gc.isenabled()  # someone else's choice is left alone
    finally:
        gc.enable()


def test_a_caller_that_turned_gc_off_keeps_it_off():
    gc.disable()
    try:
        with startup_gc.held("launch"):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
