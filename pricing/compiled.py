"""The offers catalog for ranking without pandas: a compiled `OfferTable` per set of sources.

`load_offer_catalog` resolves the sources as `pricing.catalog.load_catalog` does and reads
`<cache>/.compiled/<id>.offers` when it was built from the same inputs: each source file's size,
mtime and recorded sha256 (cache meta.json / snapshot.json), the live spot overlay, the risk
files. Otherwise it parses once with pandas (`load_catalog`) and stores the table, so the next
call, and every call after `launcher catalog refresh` (which compiles at once), needs numpy only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pricing.sources import SNAPSHOT_META, CatalogSource, resolve_sources
from pricing.table import OfferTable, TableFileError

# Bump when what the table holds for the same source files changes (parsing, joining, risk).
COMPILE_VERSION = "1"
SNAPSHOT_ADVISOR = Path(__file__).parent / "snapshot" / "aws_spot_advisor.csv"


@dataclass(frozen=True)
class OfferCatalog:
    """What ranking needs: the table, where each cloud's prices came from, the risk data used."""

    table: OfferTable
    sources: dict[str, CatalogSource]
    risk_source: str = "snapshot"

    @property
    def clouds(self) -> tuple[str, ...]:
        return tuple(sorted(self.sources))

    def regions(self, clouds: tuple[str, ...] | None = None) -> tuple[str, ...]:
        return self.table.present("region", self.table.isin("cloud", clouds) if clouds else None)

    def accelerators(self) -> tuple[str, ...]:
        return self.table.present("accelerator")


_PROCESS_CACHE: dict[tuple[str, str], OfferCatalog] = {}


def load_offer_catalog(catalog_dir: Path | str | None, *, cache_dir: Path, risk_file: Path) -> OfferCatalog:
    sources = resolve_sources(Path(catalog_dir) if catalog_dir is not None else None, cache_dir)
    signature = compile_signature(sources, cache_dir, risk_file)
    ident = hashlib.sha256(json.dumps([[c, str(s.path)] for c, s in sorted(sources.items())]).encode()).hexdigest()
    key = (ident, signature)
    if key in _PROCESS_CACHE:
        return _PROCESS_CACHE[key]
    path = cache_dir / ".compiled" / f"{ident[:16]}.offers"
    risk_source = "cache" if (cache_dir / "aws" / "spot_advisor.csv").is_file() else "snapshot"
    try:
        table = OfferTable.load(path, signature)
    except TableFileError:
        table = compile_table(catalog_dir, cache_dir=cache_dir, risk_file=risk_file, path=path, signature=signature)
    catalog = OfferCatalog(table=table, sources=sources, risk_source=risk_source)
    _PROCESS_CACHE[key] = catalog
    return catalog


def compile_table(
    catalog_dir: Path | str | None, *, cache_dir: Path, risk_file: Path, path: Path, signature: str
) -> OfferTable:
    """Parse with pandas (the slow path) and store the table; a read-only cache only costs speed."""
    from pricing.catalog import load_catalog

    catalog = load_catalog(catalog_dir, cache_dir=cache_dir, risk_file=risk_file)
    table = catalog.table
    try:
        _write_private(path, table.to_bytes(signature))
    except OSError:
        pass
    return table


def clear_process_cache() -> None:
    _PROCESS_CACHE.clear()


def compile_signature(sources: dict[str, CatalogSource], cache_dir: Path, risk_file: Path) -> str:
    """Everything the table is computed from, as one hash (stat data plus recorded content hashes)."""
    snapshot_sha = _snapshot_hashes()
    parts: list = [COMPILE_VERSION]
    for cloud, src in sorted(sources.items()):
        recorded = snapshot_sha.get(cloud) if src.kind == "snapshot" else _cache_sha(src)
        parts.append([cloud, src.kind, str(src.path), _stat(src.path), recorded, _stat(src.spot_overlay), src.as_of])
    for extra in (risk_file, cache_dir / "aws" / "spot_advisor.csv", SNAPSHOT_ADVISOR):
        parts.append(_stat(extra))
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _stat(path: Path | None) -> list | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), st.st_size, st.st_mtime_ns]


def _snapshot_hashes() -> dict[str, str]:
    try:
        meta = json.loads(SNAPSHOT_META.read_text())
    except (OSError, ValueError):
        return {}
    return {c: info.get("sha256") for c, info in meta.get("clouds", {}).items()}


def _cache_sha(src: CatalogSource) -> str | None:
    if src.kind != "cache":
        return None
    try:
        return json.loads((src.path.parent / "meta.json").read_text()).get("sha256")
    except (OSError, ValueError):
        return None


def _write_private(path: Path, data: bytes) -> None:
    """Write atomically (temp file + rename in the same folder), folder 0700, file 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

