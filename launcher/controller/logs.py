"""Job logs: the executor writes `runs/<id>/logs/rank-N.log`; these helpers show them.

`LogFollower` tails every rank's file in a thread and hands complete lines to a sink (the
terminal during `launch`, stdout for `launcher logs --follow`), prefixed `(rank N)` when there
is more than one rank. Tailing files (instead of piping the job through the controller) keeps a
job and its log alive when the controller dies. Terminal escapes (colours a job or SkyPilot
printed for a terminal) are removed from what is shown.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

from launcher.executors.ansi import strip_ansi

_RANK_RE = re.compile(r"^rank-(\d+)\.log$")


def log_files(run_dir: Path) -> dict[int, Path]:
    d = run_dir / "logs"
    if not d.is_dir():
        return {}
    out = {}
    for p in d.iterdir():
        m = _RANK_RE.match(p.name)
        if m:
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def prefix_for(rank: int, multi: bool) -> str:
    return f"(rank {rank}) " if multi else ""


def read_logs(run_dir: Path, *, rank: int | None = None, multi: bool | None = None) -> list[str]:
    """All lines so far (rank order when not following)."""
    files = log_files(run_dir)
    if multi is None:
        multi = len(files) > 1
    lines = []
    for r, p in files.items():
        if rank is not None and r != rank:
            continue
        text = p.read_text(errors="replace")
        lines.extend(prefix_for(r, multi and rank is None) + strip_ansi(line) for line in text.splitlines())
    return lines


class LogFollower:
    def __init__(
        self,
        run_dir: Path,
        sink: Callable[[str], None],
        *,
        multi: bool,
        rank: int | None = None,
        from_start: bool = True,
        interval_s: float = 0.02,
    ) -> None:
        self.run_dir = run_dir
        self.sink = sink
        self.multi = multi and rank is None
        self.rank = rank
        self.interval_s = interval_s
        self._offsets: dict[int, int] = {}
        self._partial: dict[int, bytes] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not from_start:
            for r, p in log_files(run_dir).items():
                self._offsets[r] = p.stat().st_size

    def poll_once(self) -> int:
        """Emit every complete new line; returns how many."""
        n = 0
        for r, p in log_files(self.run_dir).items():
            if self.rank is not None and r != self.rank:
                continue
            try:
                with open(p, "rb") as f:
                    f.seek(self._offsets.get(r, 0))
                    chunk = f.read()
            except OSError:
                continue
            if not chunk:
                continue
            self._offsets[r] = self._offsets.get(r, 0) + len(chunk)
            data = self._partial.pop(r, b"") + chunk
            *lines, rest = data.split(b"\n")
            if rest:
                self._partial[r] = rest
            for line in lines:
                self.sink(prefix_for(r, self.multi) + strip_ansi(line.decode(errors="replace")))
                n += 1
        return n

    def flush(self) -> None:
        """Emit what is left, including a last line without a newline."""
        self.poll_once()
        for r, rest in sorted(self._partial.items()):
            self.sink(prefix_for(r, self.multi) + strip_ansi(rest.decode(errors="replace")))
        self._partial.clear()

    def start(self) -> LogFollower:
        self._thread = threading.Thread(target=self._loop, name="log-follower", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.poll_once() == 0:
                self._stop.wait(self.interval_s)  # stop() ends the wait at once
