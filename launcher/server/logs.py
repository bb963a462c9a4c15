"""Log streaming by byte offset: the server sends each rank's new bytes with the offset they end
at; a client that reconnects (to this or another replica) sends the offsets it has, so nothing is
lost or repeated across a failover."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from launcher.controller.logs import log_files
from launcher.errors import BadInputError

MAX_CHUNK_BYTES = 256 * 1024


def parse_offsets(raw: str) -> dict[int, int]:
    """'0:120,1:64' -> {0: 120, 1: 64}."""
    out: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        rank, sep, offset = part.partition(":")
        if not sep or not rank.isdigit() or not offset.isdigit():
            raise BadInputError(f"offsets must look like 0:120,1:64, got {raw!r}")
        out[int(rank)] = int(offset)
    return out


def format_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{r}:{o}" for r, o in sorted(offsets.items()))


def log_chunks(run_dir: Path, offsets: dict[int, int], *, rank: int | None, complete_lines: bool) -> Iterator[dict]:
    """New text of each rank's log after its offset: {"rank", "offset" (where it ends), "text"}.
    With `complete_lines`, only up to the last newline (a line still being written waits, and
    a multi-byte character is never split)."""
    for r, path in log_files(run_dir).items():
        if rank is not None and r != rank:
            continue
        start = offsets.get(r, 0)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read(MAX_CHUNK_BYTES)
        except OSError:
            continue
        if complete_lines:
            data = data[: data.rfind(b"\n") + 1]
        if data:
            yield {"rank": r, "offset": start + len(data), "text": data.decode(errors="replace")}
