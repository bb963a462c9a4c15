"""`$LAUNCHER_HOME/clusters.yaml`: read with one readable error, written atomically (0600)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from launcher import paths
from launcher.atomic import atomic_write_text
from launcher.clusters.models import ClusterEntry, ClustersFile
from launcher.errors import ConflictError, NotFoundError


def clusters_path() -> Path:
    return paths.clusters_file()


def load_clusters(path: Path | None = None) -> ClustersFile:
    """The declared clusters; none when the file does not exist (nothing is created)."""
    from launcher.config_file import load_yaml_model

    return load_yaml_model(path or clusters_path(), ClustersFile, missing_ok=True, what="clusters file")


def _write(path: Path, data: ClustersFile) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = {"clusters": [c.model_dump(exclude_defaults=True) | {"name": c.name, "infra": c.infra} for c in data.clusters]}
    atomic_write_text(path, "# clusters you already have; managed by `launcher clusters add|remove`\n" + yaml.safe_dump(body, sort_keys=False))
    os.chmod(path, 0o600)


def save_cluster(entry: ClusterEntry, *, replace: bool = False, path: Path | None = None) -> ClustersFile:
    from filelock import FileLock

    path = path or clusters_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(str(path) + ".lock", timeout=30):
        current = load_clusters(path)
        if current.get(entry.name) is not None and not replace:
            raise ConflictError(f"cluster {entry.name!r} is already declared", hint="use --replace to change it")
        others = [c for c in current.clusters if c.name != entry.name]
        new = ClustersFile(clusters=[*others, entry])
        _write(path, new)
        return new


def remove_cluster(name: str, *, missing_ok: bool = False, path: Path | None = None) -> bool:
    from filelock import FileLock

    path = path or clusters_path()
    if not path.exists():
        if missing_ok:
            return False
        raise NotFoundError(f"no cluster {name!r} is declared (no {path})")
    with FileLock(str(path) + ".lock", timeout=30):
        current = load_clusters(path)
        if current.get(name) is None:
            if missing_ok:
                return False
            from launcher.errors import did_you_mean

            raise NotFoundError(f"no cluster {name!r} is declared", hint=did_you_mean(name, [c.name for c in current.clusters]))
        _write(path, ClustersFile(clusters=[c for c in current.clusters if c.name != name]))
        return True
