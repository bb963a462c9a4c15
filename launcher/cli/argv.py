"""Global options (`--debug`, `--catalog-dir DIR`) are accepted before or after the subcommand:
`launcher offers --gpus H100:8 --catalog-dir D` means `launcher --catalog-dir D offers --gpus H100:8`."""

from __future__ import annotations

import os

GLOBAL_FLAGS = ("--debug",)
GLOBAL_OPTIONS = ("--catalog-dir",)  # take one value


def debug_requested(argv: list[str]) -> bool:
    """Tracebacks and reasons wanted: `--debug` anywhere, or LAUNCHER_DEBUG set."""
    return "--debug" in argv or bool(os.environ.get("LAUNCHER_DEBUG"))


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move global options found anywhere (before a `--`) to the front, keeping their order."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        if a in GLOBAL_FLAGS or any(a.startswith(o + "=") for o in GLOBAL_OPTIONS):
            front.append(a)
        elif a in GLOBAL_OPTIONS and i + 1 < len(argv):
            front.extend(argv[i : i + 2])
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def command_index(argv: list[str]) -> int:
    """Where the command word is in `argv` (global options first, as hoist_global_options
    leaves them); len(argv) when there is none."""
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        i += 2 if argv[i] in GLOBAL_OPTIONS else 1
    return min(i, len(argv))


def command_word(argv: list[str]) -> str | None:
    """The command `argv` names; None when it names none, or when `--version` comes first
    (eager: it prints and exits before any command)."""
    i = command_index(argv)
    if "--version" in argv[:i] or i == len(argv):
        return None
    return argv[i]


def launch_argv(argv: list[str]) -> list[str]:
    """`launch ARGS` is exactly `launcher launch ARGS` (global options may come first)."""
    globals_ = [a for a in argv if a == "--debug"]
    rest = [a for a in argv if a != "--debug"]
    return [*globals_, "launch", *rest]
