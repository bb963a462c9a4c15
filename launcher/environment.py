"""The Python environment a run really ran with: every installed distribution (name, version and,
for local, editable or VCS installs, where it came from and at which revision), hashed, plus the
interpreter. The local backend's jobs run with the launcher's own interpreter (`python` on their
PATH), so the launcher's environment is the job's. Recorded at launch; `launcher reproduce`
compares against it and `--make-env` rebuilds it; `runs diff` shows it package by package.

Reading another interpreter's environment (a venv to compare or one just built) asks that
interpreter only for its `sys.path` and version: the metadata is read from here, so nothing of
the launcher needs to be importable there.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

_GIT_TIMEOUT_S = 30


@dataclass(frozen=True)
class Distribution:
    name: str  # normalized (PEP 503): "pyyaml", "gpu-launcher"
    version: str
    source: str | None = None  # "editable /path", "dir /path", "git+https://...", "archive https://..."
    revision: str | None = None  # git commit of a local/editable source ("+dirty" when it had changes), VCS commit, archive hash

    @property
    def pin(self) -> str:
        """One line that names exactly what was installed."""
        return f"{self.name}=={self.version}" + (f" @ {self.revision}" if self.revision else "")

    @property
    def source_dir(self) -> Path | None:
        if self.source and self.source.split(" ", 1)[0] in ("editable", "dir"):
            return Path(self.source.split(" ", 1)[1])
        return None


@dataclass(frozen=True)
class Environment:
    python: str  # "3.11.9"
    implementation: str  # "cpython"
    distributions: tuple[Distribution, ...]
    distributions_hash: str

    def to_json(self) -> dict:
        return {
            "python": self.python,
            "implementation": self.implementation,
            "distributions": [{k: v for k, v in asdict(d).items() if v is not None} for d in self.distributions],
            "distributions_hash": self.distributions_hash,
        }

    @classmethod
    def from_json(cls, data: dict) -> Environment:
        dists = tuple(Distribution(**d) for d in data.get("distributions", []))
        return cls(data.get("python", ""), data.get("implementation", ""), dists, data.get("distributions_hash") or hash_distributions(dists))

    def by_name(self) -> dict[str, Distribution]:
        return {d.name: d for d in self.distributions}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def hash_distributions(dists: Iterable[Distribution]) -> str:
    """sha256 over the sorted pins: the same set of installs hashes the same anywhere."""
    lines = sorted(d.pin for d in dists)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _git_revision(path: Path) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        head = subprocess.run(["git", "-C", str(path), "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, env=env)  # fmt: skip
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True, timeout=_GIT_TIMEOUT_S, env=env)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    rev = head.stdout.strip()
    return rev + ("+dirty" if status.returncode == 0 and status.stdout.strip() else "")


def _source(dist) -> tuple[str | None, str | None]:
    """Where a distribution was installed from (PEP 610 direct_url.json), and its revision."""
    try:
        text = dist.read_text("direct_url.json")
    except OSError:
        text = None
    if not text:
        return None, None
    try:
        info = json.loads(text)
    except ValueError:
        return None, None
    url = str(info.get("url", ""))
    if "vcs_info" in info:
        vcs = info["vcs_info"]
        return f"{vcs.get('vcs', 'vcs')}+{url}", vcs.get("commit_id")
    if "dir_info" in info:
        path = unquote(urlparse(url).path) if url.startswith("file:") else url
        if not info["dir_info"].get("editable"):
            return f"dir {path}", None  # a copy made at install time: the directory's HEAD now says nothing about it
        return f"editable {path}", _git_revision(Path(path)) if Path(path).is_dir() else None
    if "archive_info" in info:
        archive = info["archive_info"]
        digest = archive.get("hash") or next(iter((archive.get("hashes") or {}).items()), None)
        if isinstance(digest, tuple):
            digest = "=".join(digest)
        return f"archive {url}", digest
    return None, None


def _name_version(dist) -> tuple[str | None, str]:
    """Name and Version from the metadata's header lines only (parsing whole METADATA files with
    the email parser costs about a second for a few hundred distributions)."""
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    except OSError:
        text = ""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line.startswith("Name:") and name is None:
            name = line[5:].strip()
        elif line.startswith("Version:") and version is None:
            version = line[8:].strip()
        if name and version:
            break
    return name, version or ""


def read_distributions(path: Sequence[str] | None = None) -> tuple[Distribution, ...]:
    """The distributions importable from `path` (default: this interpreter's sys.path). The first
    one of a name on the path wins, as for an import."""
    from importlib.metadata import distributions

    seen: dict[str, Distribution] = {}
    for dist in distributions(**({"path": list(path)} if path is not None else {})):
        name, version = _name_version(dist)
        if not name:
            continue
        key = normalize(name)
        first = seen.get(key)
        if first is not None:
            # An editable install's stale `*.egg-info` in the working directory (first on the
            # path under `python -m`) names the same install: take the source from the real one.
            if first.source is None and first.version == version:
                source, revision = _source(dist)
                if source is not None:
                    seen[key] = Distribution(key, version, source, revision)
            continue
        source, revision = _source(dist)
        seen[key] = Distribution(key, version, source, revision)
    return tuple(sorted(seen.values(), key=lambda d: d.name))


def current() -> Environment:
    """This interpreter's environment."""
    dists = read_distributions()
    return Environment(platform.python_version(), sys.implementation.name, dists, hash_distributions(dists))


def of_interpreter(python: Path | str, *, timeout_s: float = 60) -> Environment:
    """Another interpreter's environment (a venv's `bin/python`), read from here."""
    code = "import json, platform, sys; print(json.dumps([sys.path, platform.python_version(), sys.implementation.name]))"
    p = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise OSError(f"{python} could not report its environment: {p.stderr.strip()[-300:]}")
    path, version, impl = json.loads(p.stdout)
    dists = read_distributions([x for x in path if x])
    return Environment(version, impl, dists, hash_distributions(dists))


@dataclass(frozen=True)
class EnvDifference:
    name: str  # a distribution, or "python"
    recorded: str | None  # version (@ revision); None: not installed then
    here: str | None  # ... now
    # False: only the revision of an editable install's source moved (live code: a rebuilt
    # environment would point at the same directory, so only the weights check can tell)
    blocking: bool = True

    @property
    def kind(self) -> str:
        if self.recorded is None:
            return "added"
        if self.here is None:
            return "missing"
        return "changed"


def _shown(d: Distribution | None, *, revision: bool) -> str | None:
    if d is None:
        return None
    return d.version + (f" @ {d.revision}" if revision and d.revision else "")


def differences(recorded: Environment, here: Environment, *, own_source: Path | None = None) -> list[EnvDifference]:
    """Package by package, what differs (python first, then by name). A distribution installed
    from `own_source` (the run's own repository, which `reproduce` checks out at the recorded
    revision) is compared by version only."""
    out = []
    if (recorded.python, recorded.implementation) != (here.python, here.implementation):
        out.append(EnvDifference("python", f"{recorded.implementation} {recorded.python}", f"{here.implementation} {here.python}"))
    a, b = recorded.by_name(), here.by_name()
    own = own_source.resolve() if own_source is not None else None
    for name in sorted(set(a) | set(b)):
        da, db = a.get(name), b.get(name)
        skip_rev = own is not None and any(d is not None and d.source_dir is not None and _same_dir(d.source_dir, own) for d in (da, db))
        ra, rb = _shown(da, revision=not skip_rev), _shown(db, revision=not skip_rev)
        if ra != rb:
            editable_moved = (da is not None and db is not None and da.version == db.version and da.source == db.source
                              and (da.source or "").startswith("editable "))  # fmt: skip
            out.append(EnvDifference(name, ra, rb, blocking=not editable_moved))
    return out


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b
    except OSError:
        return False


def requirements(env: Environment) -> tuple[list[str], list[Distribution]]:
    """`name==version` lines for the package index, and the distributions that came from
    elsewhere (a local directory, VCS, an archive) and must be installed from their source."""
    index, other = [], []
    for d in env.distributions:
        (other if d.source else index).append(d if d.source else f"{d.name}=={d.version}")
    return index, other
