"""Rendering at the edge: JSON to stdout, rich tables for people, messages to stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str, sort_keys=False) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, stderr: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(safe_cell(title)) if title else None, show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        # Text, not markup: a name like "[link=...]" is shown as written, never interpreted.
        table.add_row(*[Text(safe_cell(v)) for v in r])
    stream = sys.stderr if stderr else sys.stdout
    Console(file=stream, width=_width(stream)).print(table)


def print_text_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Aligned plain-text columns on stdout, for hot paths: no rich import (tens of ms)."""
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    sys.stdout.write("\n".join(lines) + "\n")


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if c != 0x0A}


def safe_cell(v: Any) -> str:
    """A cell as text with terminal control characters (escape sequences, carriage returns,
    bells) shown as \\xNN instead of acting on the terminal."""
    return "" if v is None else str(v).translate(_CONTROL)


def info(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def _width(stream) -> int:
    """The terminal's width (at least 120); into a file or pipe, wide enough that cells such as
    resource types and ids are not folded (logs and greps see them whole)."""
    if not stream.isatty():
        return 240
    import shutil

    return max(120, shutil.get_terminal_size((160, 40)).columns)
