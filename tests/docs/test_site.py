"""The docs site builds with `mkdocs build --strict` (a broken link, a missing anchor or a page
left out of the nav fails it), its CLI reference is generated from the typer app, and README.md
stays a front page whose two commands come first and whose links land on files that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli.main import COMMAND_HOMES
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"), "-d", str(out)],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return out


def test_every_page_is_built(site):
    pages = sorted(p.relative_to(REPO / "docs").with_suffix("") for p in (REPO / "docs").rglob("*.md"))
    assert len(pages) >= 16
    for page in pages:
        html = site / ("index.html" if page.name == "index" else page / "index.html")
        assert html.is_file(), f"docs/{page}.md was not built"
        # GitHub's tables want `a\\|b` in code spans; the site shows a plain pipe (docs/_hooks/table_pipes.py)
        assert "\\|" not in html.read_text(), f"docs/{page}.md: an escaped pipe reached the page"


def test_cli_reference_is_generated_from_the_typer_app(site):
    html = (site / "reference" / "cli" / "index.html").read_text()
    source = (REPO / "docs" / "reference" / "cli.md").read_text()
    assert "launcher runs list" not in source, "the CLI reference is generated; do not write it by hand"
    for command in COMMAND_HOMES:
        assert f'id="launcher-{command}"' in html, f"`launcher {command}` missing from the CLI reference"
    # a subcommand, an option and its help, as `launcher report --help` prints them
    for text in ('id="launcher-runs-list"', 'id="launcher-reap-schedule-install"', "--month", "--by"):
        assert text in html, text


def test_readme_is_a_front_page_with_the_two_commands_first():
    lines = README.splitlines()
    assert 150 <= len(lines) < 250, len(lines)
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [ln.split("#")[0].strip() for ln in first_block.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    assert (REPO / "scripts" / "quickstart.sh").is_file() and (REPO / "scripts" / "test.sh").is_file()


def test_readme_links_land_on_files_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    for link in local:
        assert (REPO / link).exists(), f"README links to {link}, which does not exist"
