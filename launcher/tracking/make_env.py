"""`launcher reproduce RUN --make-env DIR`: a virtual environment with exactly the distributions a
run recorded, from the package index (uv when installed, else pip), bounded in time, with the
installer's progress passed through, then checked against the record.

Distributions the run had from elsewhere are installed from their recorded source: an editable or
local directory that still exists, a VCS URL at its commit, an archive URL. Everything goes in with
`--no-deps`: the record is already the complete, consistent set.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from launcher.environment import Distribution, Environment, differences, of_interpreter, requirements
from launcher.errors import BadInputError, ProviderError, RefusedError, ToolMissingError

DEFAULT_TIMEOUT_S = 1800.0


def venv_python(dest: Path) -> Path:
    return dest / "bin" / "python"


def _installer() -> str | None:
    return shutil.which("uv")


def build_env(
    env: Environment,
    dest: Path,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Callable[[str], None] = lambda line: None,
    own_source: Path | None = None,
    use_uv: bool | None = None,
) -> Path:
    """Build the environment in `dest` (new or empty). Returns its python. Raises when it cannot
    be built in time or does not come out as recorded (the table of what differs in the message)."""
    dest = dest.resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadInputError(f"--make-env {dest}: the directory exists and is not empty", hint="give a new directory")
    deadline = time.monotonic() + timeout_s
    uv = _installer() if use_uv is not False else None
    if use_uv and uv is None:
        raise ToolMissingError("uv is not installed")
    base = _base_python(env)
    progress(f"make-env: creating {dest} (Python {env.python}, {'uv' if uv else 'pip'}; at most {timeout_s:.0f}s in all)")
    if uv:
        _step([uv, "venv", "--quiet", "--python", base, str(dest)], deadline, progress)
    else:
        _step([base, "-m", "venv", str(dest)], deadline, progress)
    python = venv_python(dest)
    index, other = requirements(env)
    missing = [d for d in other if not _installable(d)]
    if missing:
        raise RefusedError(
            "cannot rebuild the environment: " + "; ".join(f"{d.name} came from {d.source}, which is gone" for d in missing)
        )
    req = dest / "launcher-requirements.txt"
    req.write_text("".join(line + "\n" for line in index))
    install = [uv, "pip", "install", "--python", str(python)] if uv else [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    progress(f"make-env: installing {len(index)} distributions from the package index")
    if index:
        _step([*install, "--no-deps", "-r", str(req)], deadline, progress)
    for d in other:
        progress(f"make-env: installing {d.name} from {d.source}")
        _step([*install, "--no-deps", *_source_args(d)], deadline, progress)
    built = of_interpreter(python)
    diffs = [d for d in differences(env, built, own_source=own_source) if d.blocking]
    if diffs:
        rows = "; ".join(f"{x.name}: recorded {x.recorded or 'nothing'}, built {x.here or 'nothing'}" for x in diffs[:10])
        raise RefusedError(f"the environment built in {dest} differs from the record: {rows}")
    progress(f"make-env: {dest} has the {len(env.distributions)} recorded distributions")
    return python


def _base_python(env: Environment) -> str:
    """An interpreter of the recorded version: this one, or `pythonX.Y` on PATH."""
    want = ".".join(env.python.split(".")[:2])
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    if want == mine:
        return sys.executable
    other = shutil.which(f"python{want}")
    if other is None:
        raise ToolMissingError(f"the run used Python {env.python}; no python{want} is on PATH to build its environment with")
    return other


def _installable(d: Distribution) -> bool:
    src = d.source_dir
    return src is None or src.is_dir()


def _source_args(d: Distribution) -> list[str]:
    kind, _, where = (d.source or "").partition(" ")
    if kind == "editable":
        return ["-e", where]
    if kind in ("dir", "archive"):
        return [where]
    # VCS: "git+https://host/repo" at the recorded commit
    return [f"{kind}@{d.revision}" if d.revision else kind]


def _step(argv: Sequence[str], deadline: float, progress: Callable[[str], None]) -> None:
    """Run one installer command, its output passed to `progress` line by line, killed at the deadline."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise ProviderError("building the environment ran out of time", hint="give --make-env-timeout more seconds")
    env = {**os.environ, "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)  # the new environment is built from its own contents only
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    tail: list[str] = []
    try:
        assert proc.stdout is not None
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(argv, 0)
            if not sel.select(timeout=min(left, 1.0)):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stdout.readline()
            if not line:
                break
            line = line.rstrip()
            if line:
                tail = (tail + [line])[-5:]
                progress(f"  {line}")
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise ProviderError(f"building the environment ran out of time during: {' '.join(argv[:4])} ...",
                            hint="give --make-env-timeout more seconds") from None  # fmt: skip
    if rc != 0:
        raise ProviderError(f"building the environment failed (exit {rc}) during {' '.join(argv[:4])} ...: {' | '.join(tail[-3:])}")
