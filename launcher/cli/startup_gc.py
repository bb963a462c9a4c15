"""The cyclic garbage collector, held off while a quick command runs in its own process.

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

QUICK_COMMANDS = frozenset({"launch", "offers"})
_holding = [False]


def hold(command: str | None) -> None:
    """GC off for the rest of this process when `command` is a quick one (and GC was on)."""
    if command in QUICK_COMMANDS and gc.isenabled():
        gc.disable()
        _holding[0] = True


def release() -> None:
    """Before anything long-running: startup's objects to the permanent generation, GC on.
    A no-op unless `hold` turned it off."""
    if _holding[0]:
        _holding[0] = False
        if not gc.isenabled():
            gc.freeze()
            gc.enable()
