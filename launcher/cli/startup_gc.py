"""What a quick command skips in its own process: the cyclic garbage collector, and the search
for pydantic plugins (skip_pydantic_plugins).

Starting `launch` or `offers` imports typer, pydantic, SQLAlchemy or numpy and our own modules:
several hundred thousand objects made and almost none freed, so the collector's ~150 passes
(about a tenth of a local launch's CPU) would only walk live objects. The console entry points
`hold()` it for those commands and never turn it back on: the process ends with the command
(main._exit freezes what is left, so the collection at shutdown walks nothing either). A command
that goes on to run for long (the foreground controller) calls `release()` first: startup's
objects move to the permanent generation (never walked again) and collection resumes.
"""

from __future__ import annotations

import gc
import os
import sys

QUICK_COMMANDS = frozenset({"launch", "offers"})
# Quick commands that validate with pydantic models; `offers` builds none (its options are plain
# values: launcher.cli.plain_params), so importing pydantic to skip a search would only cost.
MODEL_COMMANDS = frozenset({"launch"})
_holding = [False]
_quick = [False]


def hold(command: str | None) -> None:
    """GC off for the rest of this process when `command` is a quick one (and GC was on)."""
    _quick[0] = command in QUICK_COMMANDS
    if command in QUICK_COMMANDS and gc.isenabled():
        gc.disable()
        _holding[0] = True


def quick_process() -> bool:
    """Did `hold` see a quick command (which ends with the process, GC released or not)?"""
    return _quick[0]


def release() -> None:
    """Before anything long-running: startup's objects to the permanent generation, GC on.
    A no-op unless `hold` turned it off."""
    if _holding[0]:
        _holding[0] = False
        if not gc.isenabled():
            gc.freeze()
            gc.enable()


def skip_pydantic_plugins(command: str | None) -> None:
    """For a quick command, no search for third-party pydantic plugins: pydantic looks for them
    in every installed package's entry points when it builds its first model (about 30 ms of a
    local launch here) and the launcher's own validation has no use for them. pydantic's cache
    of loaded plugins is set to none, in this process only: PYDANTIC_DISABLE_PLUGINS would also
    reach the job's environment and turn the user's plugins off there. A user who sets
    PYDANTIC_DISABLE_PLUGINS themselves (to anything, the empty string included) gets pydantic's
    own handling."""
    if command not in QUICK_COMMANDS or "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        return
    if command not in MODEL_COMMANDS and "pydantic.plugin._loader" not in sys.modules:
        return  # no model will be built: nothing to search for, nothing to import
    try:
        from pydantic.plugin import _loader
    except ImportError:  # a pydantic without plugin support: nothing to skip
        return
    if getattr(_loader, "_plugins", False) is None:  # not searched yet; a private cache, so checked
        _loader._plugins = {}
