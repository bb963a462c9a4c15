"""Secret values out of the job output we store: a streaming redactor over bytes.

What a value of the spec's `secrets:` is replaced by (`MARKER`) in the logs we write: the value
itself, its stripped form (a YAML block scalar ends in a newline the job may not print), and the
encodings a job commonly prints without meaning to transform it: JSON/Python string escaping
(a multi-line key printed inside a dict), URL encoding, and base64 of the whole value. A value
transformed any other way (hashed, encrypted, base64 of a longer string that contains it, split
by the job into pieces printed apart) is not recognised.

Values shorter than `MIN_SECRET_CHARS` are not redacted: replacing `a` or `42` everywhere would
wreck the log and hide nothing a reader could not guess.

The output is a byte stream cut at arbitrary points, so a value may arrive split across reads.
`StreamRedactor` holds back only a tail that is still the beginning of some value (a line that
ends in a newline is passed on at once, so `launcher logs -f` stays live) and replaces every
complete occurrence, overlapping ones included, by one marker per run of secret bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import quote, quote_plus

MARKER = "***"
MIN_SECRET_CHARS = 4
_HEAD = 8  # bytes of a pattern searched for first when looking for a cut-off secret
_MAX_HELD_BYTES = 1 << 16  # most output held back waiting for overlapping secrets to complete


def secret_patterns(values: Iterable[str]) -> list[bytes]:
    """The byte strings to redact for these secret values (longest first, no duplicates)."""
    out: set[bytes] = set()
    for value in values:
        if len(value.strip()) < MIN_SECRET_CHARS:
            continue
        for v in dict.fromkeys((value, value.strip())):
            raw = v.encode()
            forms = {
                v,
                json.dumps(v)[1:-1],
                json.dumps(v, ensure_ascii=False)[1:-1],
                repr(v)[1:-1],
                quote(v, safe=""),
                quote_plus(v, safe=""),
                base64.b64encode(raw).decode(),
                base64.urlsafe_b64encode(raw).decode(),
            }
            forms |= {f.rstrip("=") for f in forms if f.endswith("=")}
            out |= {f.encode() for f in forms if len(f) >= MIN_SECRET_CHARS}
    return sorted(out, key=lambda p: (-len(p), p))


def _merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching [start, end) intervals joined, in order."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _chains(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intervals joined where they overlap (touching ones stay apart)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


class StreamRedactor:
    """feed() the stream's chunks in order and write what it returns; close() at the end.
    With no patterns it returns each chunk unchanged."""

    def __init__(self, patterns: Sequence[bytes], marker: bytes = MARKER.encode()) -> None:
        self._patterns = [p for p in patterns if p]
        self._marker = marker
        self._pending = b""
        self._ends_in_marker = False  # the last bytes returned were a marker

    @classmethod
    def for_values(cls, values: Iterable[str]) -> StreamRedactor:
        return cls(secret_patterns(values))

    def _occurrences(self, buf: bytes) -> list[tuple[int, int]]:
        found = []
        for p in self._patterns:
            i = buf.find(p)
            while i >= 0:
                found.append((i, i + len(p)))
                i = buf.find(p, i + 1)
        return found

    def _prefix_start(self, buf: bytes) -> int:
        """The first position from which the rest of `buf` is a proper prefix of some pattern
        (len(buf) when none): what may be the beginning of a secret still arriving. Candidates
        are found with bytes.find on each pattern's first bytes (a log is long, secrets rare)."""
        n, best = len(buf), len(buf)
        for p in self._patterns:
            lo = max(0, n - len(p) + 1)
            head = p[:_HEAD]
            i = buf.find(head, lo)  # candidates with at least _HEAD bytes left
            while 0 <= i < best and not p.startswith(buf[i:]):
                i = buf.find(head, i + 1)
            if 0 <= i < best:
                best = i
                continue
            for i in range(max(lo, n - _HEAD + 1), min(n, best)):  # the last few positions
                if p.startswith(buf[i:]):
                    best = i
                    break
        return best

    def _render(self, buf: bytes, intervals: list[tuple[int, int]]) -> bytes:
        parts, at = [], 0
        for s, e in _merged(intervals):
            # secret bytes right after the previous read's: the same run, the same marker
            parts += [buf[at:s], b"" if s == 0 and self._ends_in_marker else self._marker]
            at = e
        parts.append(buf[at:])
        if buf:
            self._ends_in_marker = at == len(buf) and bool(intervals)
        return b"".join(parts)

    def feed(self, data: bytes) -> bytes:
        if not self._patterns:
            return data
        buf = self._pending + data
        found = self._occurrences(buf)
        hold = self._prefix_start(buf)
        # Occurrences reaching into the held tail are held whole, with those overlapping them (the
        # beginning of a longer secret may still be arriving). A chain of them longer than
        # _MAX_HELD_BYTES (say "aaaa" in an endless run of a's) goes out redacted instead.
        for start, end in _chains(found):
            if start < hold < end:
                hold = start if len(buf) - start <= _MAX_HELD_BYTES else end
                break
        self._pending = buf[hold:]
        return self._render(buf[:hold], [(s, e) for s, e in found if e <= hold])

    @property
    def held_bytes(self) -> int:
        """Bytes read but not yet returned (a possible beginning of a secret)."""
        return len(self._pending)

    def close(self) -> bytes:
        """The held tail at the end of the stream; a cut-off beginning of a secret that is itself
        MIN_SECRET_CHARS long or more is redacted too."""
        buf, self._pending = self._pending, b""
        found = self._occurrences(buf)
        start = self._prefix_start(buf)
        if len(buf) - start >= MIN_SECRET_CHARS:
            found.append((start, len(buf)))
        return self._render(buf, found)


def redact_text(text: str, values: Iterable[str]) -> str:
    """`text` with every secret value (and its encodings above) replaced by MARKER."""
    r = StreamRedactor.for_values(values)
    return (r.feed(text.encode()) + r.close()).decode(errors="replace")


class RedactingWriter:
    """A text stream for code that prints the job's output (SkyPilot's `tail_logs`): each write
    has its terminal escapes removed (SkyPilot colours for a terminal), is redacted and appended
    to the binary file at once (no buffering of its own)."""

    def __init__(self, binary_out, values: Iterable[str]) -> None:
        from launcher.executors.ansi import AnsiStripper

        self._out = binary_out
        self._redactor = StreamRedactor.for_values(values)
        self._ansi = AnsiStripper()

    def write(self, s: str) -> int:
        data = self._redactor.feed(self._ansi.feed(s).encode(errors="surrogateescape"))
        if data:
            self._out.write(data)
            self._out.flush()
        return len(s)

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        """Writes the held tail; leaves the underlying file open (its owner closes it)."""
        data = self._redactor.close()
        if data:
            self._out.write(data)
        self._out.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def stream_into_log(log: Path, values: Sequence[str], produce: Callable[[RedactingWriter], object]) -> None:
    """Append what `produce` prints to its stream (SkyPilot's `tail_logs(..., output_stream=)`)
    to `log`, redacted as it arrives; a failure ends the stream with one line saying so."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as raw:
        out = RedactingWriter(raw, values)
        try:
            produce(out)
        except Exception as e:  # noqa: BLE001 - logs are a convenience; job status comes from elsewhere
            out.write(f"[launcher] log stream ended: {type(e).__name__}: {e}\n")
        finally:
            out.close()
