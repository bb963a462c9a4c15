"""Map paths inside a YAML document to line numbers, so errors can say where to look.

We compose the node tree (yaml.compose keeps marks) and record, for every mapping key and
sequence item, the 1-based line of the key (or item). Paths are tuples of keys and indexes,
the same shape as pydantic's error `loc`.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

Path_ = tuple[str | int, ...]


def line_map(text: str) -> dict[Path_, int]:
    """{path: line}. The root maps to line 1. Empty/invalid documents give {(): 1}."""
    lines: dict[Path_, int] = {(): 1}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines
    if root is not None:
        _walk(root, (), lines)
    return lines


def _walk(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*path, key)
            out[child] = key_node.start_mark.line + 1
            _walk(value_node, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            out[child] = item.start_mark.line + 1
            _walk(item, child, out)


def line_for(lines: dict[Path_, int], loc: Sequence[str | int]) -> int:
    """The line of the longest prefix of `loc` that exists in the document."""
    loc = tuple(loc)
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1
