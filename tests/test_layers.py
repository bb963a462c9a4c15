"""The import rules in pyproject.toml ([tool.importlinter]) hold, and `lint-imports` really fails
(naming the contract and the import) when one is broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_every_import_contract_is_kept():
    res = _lint(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("launcher", "pricing", "infra"):
        shutil.copytree(ROOT / pkg, dst / pkg, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + "\n" + line + "\n")


def test_lint_imports_fails_on_an_added_violation(tmp_path):
    _copy_tree(tmp_path)
    # A library reaching into the launcher, and planning reaching up into the controller.
    _append(tmp_path / "pricing" / "gpus.py", "from launcher import paths  # noqa: E402")
    _append(tmp_path / "launcher" / "planning" / "plan.py", "from launcher.controller import states  # noqa: E402")
    # A report reaching Pulumi's stacks without a provider; a provider may, and anyone may use the tags.
    _append(tmp_path / "launcher" / "report" / "build.py", "from infra import stacks  # noqa: E402")
    _append(tmp_path / "launcher" / "report" / "periods.py", "from infra import tags  # noqa: E402")
    # The CLI ranking offers itself instead of asking planning's offers service.
    _append(tmp_path / "launcher" / "cli" / "offers_cmd.py", "from pricing import rank  # noqa: E402")
    res = _lint(tmp_path)
    out = res.stdout
    assert res.returncode != 0
    assert "pricing and infra are libraries: they import nothing from launcher BROKEN" in out
    assert "pricing.gpus -> launcher.paths" in out
    assert "planning never imports the controller BROKEN" in out
    assert "launcher.planning.plan -> launcher.controller.states" in out
    assert "launcher.report.build -> infra.stacks" in out
    assert "launcher.report.periods -> infra.tags" not in out
    assert "launcher.cli.offers_cmd -> pricing.rank" in out
    assert "0 broken" not in out


def test_lint_imports_fails_on_an_added_cycle(tmp_path):
    _copy_tree(tmp_path)
    _append(tmp_path / "pricing" / "models.py", "from pricing import rank  # noqa: E402")
    res = _lint(tmp_path)
    assert res.returncode != 0
    assert "no import cycles between sibling modules in any folder BROKEN" in res.stdout
    assert "No cycles are allowed in pricing." in res.stdout


def test_every_launcher_module_is_in_a_layer():
    """A module outside every layer escapes the layer rules: each top-level package and module of
    `launcher` must be named in the layers contract."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [layers] = [c for c in conf["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    named = {m.strip() for layer in layers["layers"] for m in layer.split(":")}
    here = {
        f"launcher.{p.stem}"
        for p in (ROOT / "launcher").iterdir()
        if p.name != "__init__.py" and not p.name.startswith((".", "__")) and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert here, "no modules found under launcher/"
    assert here - named == set()
