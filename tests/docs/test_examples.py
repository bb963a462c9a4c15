"""The shell examples in the docs run, so the docs cannot drift from the CLI.

A fenced ```bash block right after a `<!-- run -->` line (in README.md or any page under docs/)
is an example this test runs: each page's marked blocks run in order, each as one
`bash -e -o pipefail` script, on the local backend, in a fresh LAUNCHER_HOME and HOME, with no
cloud credentials, from a scratch folder that links to the repository's files (so `-o nov.csv`
writes there, not into the checkout). `launcher` and `launch` on PATH are the console entry points
(`launcher.cli.entry`, what `pip install` puts in `.venv/bin`), and `python` is this interpreter.
Every block must exit 0. The marker is an HTML comment: neither GitHub nor the site shows it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.launch_helpers import CRED_VARS
from tests.conftest import REPO

MARKER = "<!-- run -->"
BLOCK_TIMEOUT_S = 180
# the pages that promise runnable examples; a page may add more
PAGES_WITH_EXAMPLES = (
    "README.md",
    "docs/getting-started.md",
    "docs/guides/launching.md",
    "docs/guides/clusters.md",
    "docs/guides/reaper.md",
    "docs/guides/reports.md",
    "docs/guides/server.md",
    "docs/guides/tracking.md",
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    script: str


def marked_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    page = path.relative_to(REPO).as_posix()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[i + 1] if i + 1 < len(lines) else ""
        assert fence.strip() == "```bash", f"{page}:{i + 1}: {MARKER} must be followed by a ```bash fence"
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{i + 2}: unclosed fence"
        blocks.append(Block(page, i + 2, "\n".join(lines[i + 2 : end]) + "\n"))
    return blocks


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


BLOCKS = {p.relative_to(REPO).as_posix(): marked_blocks(p) for p in doc_pages()}
PAGES = sorted(page for page, blocks in BLOCKS.items() if blocks)


def test_the_pages_that_promise_examples_have_them():
    for page in PAGES_WITH_EXAMPLES:
        assert BLOCKS.get(page), f"{page} has no block marked {MARKER}"
    assert sum(map(len, BLOCKS.values())) >= 10


def _scratch(tmp_path: Path) -> dict[str, str]:
    """A working folder linking to the checkout's files, a bin folder with the console scripts,
    and the environment the examples run in."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv", ".venv-focus", "site"}:
            (work / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a symlink to a venv's python would not find the venv (pyvenv.cfg is looked up beside it)
    scripts = {
        "launcher": f'exec "{sys.executable}" -c "from launcher.cli.entry import main; main()" "$@"',
        "launch": f'exec "{sys.executable}" -c "from launcher.cli.entry import launch_main; launch_main()" "$@"',
        "python": f'exec "{sys.executable}" "$@"',
    }
    for name, line in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_dir / name).chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CRED_VARS and not k.startswith("LAUNCHER_")}
    env.update(
        HOME=str(home),
        LAUNCHER_HOME=str(tmp_path / "launcher-home"),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        SKYPILOT_DISABLE_USAGE_COLLECTION="1",
        COLUMNS="200",
        WORK=str(work),
    )
    return env


def run_block(block: Block, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.script],
        capture_output=True, text=True, env=env, cwd=env["WORK"], timeout=BLOCK_TIMEOUT_S,
    )  # fmt: skip


def test_the_runner_sees_a_failing_example_and_the_console_scripts(tmp_path):
    env = _scratch(tmp_path)
    ok = run_block(Block("t", 1, "launcher --version\nlaunch --help >/dev/null\npython -c 'import launcher'\n"), env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("launcher ")
    # a failing command in the middle of a block fails it (bash -e), with the CLI's exit code
    bad = run_block(Block("t", 1, "launcher runs show no-such-run\necho not reached\n"), env)
    assert bad.returncode == 7 and "not reached" not in bad.stdout
    assert not list(Path(env["LAUNCHER_HOME"]).glob("runs/*"))


@pytest.mark.parametrize("page", PAGES)
def test_marked_examples_run(page, tmp_path):
    env = _scratch(tmp_path)
    for block in BLOCKS[page]:
        started = time.monotonic()
        r = run_block(block, env)
        took = time.monotonic() - started
        assert r.returncode == 0, (
            f"{block.page}:{block.line}: the example exited {r.returncode} after {took:.1f} s\n"
            f"--- block\n{block.script}--- stdout (tail)\n{r.stdout[-2000:]}\n--- stderr (tail)\n{r.stderr[-4000:]}"
        )
