"""Provenance of a spec about to be launched (kept apart from the controller so that
`launch --dry-run` and bad-input checks stay light)."""

from __future__ import annotations

from launcher.spec.loader import LoadedSpec


def collect_provenance(loaded: LoadedSpec):
    """`launcher.provenance.collect` for this spec: git revision and dirty hash, lockfile,
    image, seeds, and a hash of `launcher.data` paths. Raises BadInputError for a data path
    that does not exist, so callers collect it before writing anything."""
    from launcher.provenance import collect

    lb = loaded.spec.launcher
    data_paths = [loaded.resolve(p) for p in (lb.data or [])]
    return collect(
        loaded.path, loaded.text, seeds=lb.seeds, image=loaded.spec.resources.image, data_paths=data_paths, cwd=loaded.base_dir
    )
