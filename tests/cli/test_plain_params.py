"""Plain option values give exactly what typer's own (pydantic) conversion gives, and anything
not plain (signs, exponents, bounds, other types, bad input) is left to typer, error message
included. `launcher offers` itself runs without importing pydantic."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from launcher.cli import plain_params
from tests.conftest import REPO


def _app():
    app = typer.Typer()

    @app.command()
    def cmd(
        word: str = typer.Option("x", "--word"),
        n: int = typer.Option(3, "--n"),
        bounded: int = typer.Option(1, "--bounded", min=1, max=5),
        hours: float = typer.Option(1.0, "--hours"),
        maybe: float | None = typer.Option(None, "--maybe"),
        many: list[str] | None = typer.Option(None, "--many"),
        path: Path | None = typer.Option(None, "--path"),
        flag: bool = typer.Option(False, "--flag"),
    ) -> None:
        print(repr((word, n, bounded, hours, maybe, many, path, flag)))

    return app


CASES = [
    [],
    ["--word", "hello", "--n", "42", "--hours", "2.5", "--maybe", ".5", "--many", "a", "--many", "b,c"],
    ["--hours", "3", "--maybe", "7."],
    ["--n", "-4", "--hours", "1e3", "--maybe", "-0.5"],  # not plain: typer converts
    ["--n", "+4", "--hours", " 2 ", "--maybe", "inf"],
    ["--bounded", "9"],  # typer's bound check
    ["--n", "abc"],  # typer's error
    ["--hours", "x"],
    ["--path", "some/dir", "--flag"],
]


def _run(args, plain: bool):
    code = (
        "import sys, json\n"
        "from tests.cli.test_plain_params import _app\n"
        "from typer.testing import CliRunner\n"
        f"if {plain}:\n"
        "    from launcher.cli import plain_params; plain_params.install()\n"
        "r = CliRunner().invoke(_app(), json.loads(sys.argv[1]))\n"
        "print(r.exit_code, r.output)\n"
    )
    import json

    p = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, cwd=REPO,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) or "defaults" for a in CASES])
def test_same_values_and_errors_as_typer(args):
    assert _run(args, True) == _run(args, False)


def test_plain_value_refuses_what_is_not_plain():
    info = typer.models.OptionInfo()
    assert plain_params.plain_value(int, info, "12") == (True, 12)
    assert plain_params.plain_value(float, info, "0.25") == (True, 0.25)
    assert plain_params.plain_value(list[str], info, ("a", "b")) == (True, ["a", "b"])
    for annotation, value in ((int, "-1"), (int, "1.0"), (float, "1e3"), (float, "1_0"), (float, 1), (str, 3)):
        assert plain_params.plain_value(annotation, info, value) == (False, None)


def test_offers_never_imports_pydantic(tmp_path):
    env = {**os.environ, "LAUNCHER_HOME": str(tmp_path / "home")}
    code = (
        "import sys\n"
        "from launcher.cli.main import run\n"
        "rc = run(sys.argv[1:], own_process=True)\n"
        "print('PYDANTIC', 'pydantic' in sys.modules, 'RC', rc, file=sys.stderr)\n"
    )
    for args in (["offers", "--gpus", "H100:8", "--hours", "2", "--limit", "3"], ["offers", "--json", "--spot"]):
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env=env,
                           timeout=120)  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        assert "PYDANTIC False RC 0" in p.stderr
