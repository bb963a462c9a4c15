"""Reading user-supplied files with bounds: regular files only, a size cap, never a blocking read,
and YAML whose aliases cannot expand into more nodes than a cap (billion laughs).

Every spec, config, trace and cases file goes through here, so a hostile or mistaken path
(`/dev/zero`, `/proc/kmsg`, a FIFO, a 10 GB file) is refused at once with one message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from launcher.errors import BadInputError

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: specs and config files
MAX_DATA_BYTES = 64 << 20  # 64 MiB: traces and cases files (the real traces are a few MB)
MAX_YAML_NODES = 100_000  # nodes after alias expansion


def read_bounded(path: Path | str, what: str, max_bytes: int = MAX_SPEC_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; BadInputError otherwise (missing,
    a directory, a device, a FIFO, too large, unreadable)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInputError(f"{what} not found: {path}") from None
    except OSError as e:
        raise BadInputError(f"cannot read {what} {path}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise BadInputError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(f"{what} {path} is not a regular file (a device, FIFO or socket); give a file")
    if st.st_size > max_bytes:
        raise BadInputError(f"{what} {path} is {_size(st.st_size)}; the limit is {_size(max_bytes)}")
    try:
        # Non-blocking: files under /proc report size 0 and some (kmsg) block on read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, max_bytes + 1)
            chunks = [data]
            while data and sum(map(len, chunks)) <= max_bytes:
                data = os.read(fd, max_bytes + 1 - sum(map(len, chunks)))
                chunks.append(data)
        finally:
            os.close(fd)
    except BlockingIOError:
        raise BadInputError(f"{what} {path} cannot be read without waiting; give a regular file") from None
    except OSError as e:
        raise BadInputError(f"cannot read {what} {path}: {e.strerror}") from None
    out = b"".join(chunks)
    if len(out) > max_bytes:
        raise BadInputError(f"{what} {path} is larger than the limit of {_size(max_bytes)}")
    return out


def read_bounded_text(path: Path | str, what: str, max_bytes: int = MAX_SPEC_BYTES) -> str:
    data = read_bounded(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{what} {path} is not UTF-8 text (byte {e.start})") from None


def yaml_load_all(text: str, label: str, *, max_nodes: int = MAX_YAML_NODES) -> list[Any]:
    """yaml.safe_load_all, refusing documents whose aliases expand past `max_nodes` nodes or that
    nest too deeply. YAML syntax errors propagate as yaml.YAMLError (callers name the line)."""
    loader = yaml.SafeLoader(text)
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            try:
                size = _expanded_size(node, {})
            except RecursionError:
                raise BadInputError(f"{label}: YAML nested too deeply") from None
            if size > max_nodes:
                raise BadInputError(
                    f"{label}: YAML expands to more than {max_nodes:,} nodes (aliases repeating aliases); refused"
                )
            docs.append(loader.construct_document(node))
        return docs
    except RecursionError:
        raise BadInputError(f"{label}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def yaml_load(text: str, label: str) -> Any:
    docs = yaml_load_all(text, label)
    if len(docs) > 1:
        raise BadInputError(f"{label}: several YAML documents; expected one")
    return docs[0] if docs else None


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes the document has once every alias is expanded; linear in the composed graph."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias counts once (SafeLoader builds it as a cycle)
    if isinstance(node, yaml.MappingNode):
        n = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        n = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        n = 1
    memo[key] = n
    return n


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"
