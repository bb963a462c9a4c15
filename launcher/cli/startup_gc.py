"""The cyclic garbage collector, held off while a quick command starts.

Starting `launch` or `offers` imports typer, pydantic, SQLAlchemy or numpy and our own modules:
several hundred thousand objects made and almost none freed, so the collector's ~150 passes
(about a tenth of a local launch's CPU) would only walk live objects. `held()` keeps it off for
the command and puts it back as it was when the command returns; a command that goes on to run
for long (the foreground controller) calls `release()` first, which freezes what startup made
(never walked again, as at exit) and turns collection back on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

QUICK_COMMANDS = frozenset({"launch", "offers"})
_holding = [False]


@contextmanager
def held(command: str | None) -> Iterator[None]:
    """GC off while a quick command runs (when it was on); back on when it returns."""
    hold = command in QUICK_COMMANDS and gc.isenabled() and not _holding[0]
    if hold:
        gc.disable()
        _holding[0] = True
    try:
        yield
    finally:
        if hold:
            _holding[0] = False
            gc.enable()


def release() -> None:
    """Before anything long-running: startup's objects to the permanent generation, GC on.
    A no-op unless `held` turned it off."""
    if _holding[0] and not gc.isenabled():
        gc.freeze()
        gc.enable()
