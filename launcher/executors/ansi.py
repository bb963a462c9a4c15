"""Terminal escape sequences out of the job output we store and show.

SkyPilot's `tail_logs` colours its own lines (`(task, pid=...)`, `✓ Job finished`) for a
terminal; stored in `rank-N.log` they show up in `launcher logs`, files and reports as raw
`\\x1b[36m...`. CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and the
two-byte escapes are removed; everything else, tabs and carriage returns included, is kept.

`AnsiStripper` takes a stream cut at arbitrary points: a sequence split across two writes is held
back until it is complete (at most `_MAX_HELD` characters, then passed on as it is).
"""

from __future__ import annotations

import re

_SEQ = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: ESC [ params intermediates final
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: ESC ] ... BEL or ST
    r"|\x1b[()*+][ -~]"  # character set designations, e.g. ESC ( B
    r"|\x1b[@-Z\\-_=>78]"  # two-byte escapes (ESC followed by one of @-Z \ ] ^ _ = > 7 8)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
# The start of a sequence that may still be arriving at the end of a chunk.
_PARTIAL = re.compile(r"(?:\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[()*+])?|\x9b[0-?]*[ -/]*)$")
_MAX_HELD = 256


def strip_ansi(text: str) -> str:
    return _SEQ.sub("", text)


class AnsiStripper:
    """feed() chunks in order, write what it returns; close() returns what is left."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        cleaned = _SEQ.sub("", text)
        m = _PARTIAL.search(cleaned)
        if m and m.start() < len(cleaned) and len(cleaned) - m.start() <= _MAX_HELD:
            self._held = cleaned[m.start():]
            return cleaned[: m.start()]
        self._held = ""
        return cleaned

    def close(self) -> str:
        """What was held back: an escape cut off by the end of the stream is dropped."""
        self._held = ""
        return ""
