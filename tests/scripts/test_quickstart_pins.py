"""The quickstart installs the tested versions: requirements.lock is its constraints file, and it
pins every distribution the quickstart asks for, so nothing is left for pip to choose."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock line is not an exact pin: {line!r}"
            pins[_name(name)] = version
    return pins


def _quickstart_pip_args() -> list[str]:
    for line in (REPO / "scripts" / "quickstart.sh").read_text().splitlines():
        if "pip install" in line and "-e" in line:
            return shlex.split(line)
    raise AssertionError("scripts/quickstart.sh has no `pip install -e` line")


def test_quickstart_installs_with_the_lockfile_as_constraints() -> None:
    args = _quickstart_pip_args()
    assert "-c" in args, f"quickstart installs without constraints: {args}"
    assert args[args.index("-c") + 1] == "requirements.lock"


def test_lockfile_pins_everything_the_quickstart_asks_for() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    asked = list(project["dependencies"]) + list(project["optional-dependencies"]["train"])
    pins = _lock_pins()
    missing = sorted({_name(r) for r in asked} - set(pins))
    assert not missing, f"not pinned in requirements.lock: {missing}"
