"""Where each cloud's catalog comes from.

Order: an explicit catalog folder (`--catalog-dir` / LAUNCHER_CATALOG_DIR: only what it holds),
else per cloud the local cache filled by `launcher catalog refresh`, else the built-in snapshot
that ships in the package (GPU rows only, price facts with an as-of date).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pricing.clouds import CATALOG_CLOUDS
from pricing.errors import PricingInputError

SUPPORTED_CLOUDS = CATALOG_CLOUDS  # noqa: F401 - the catalog clouds, under the name callers use
SNAPSHOT_DIR = Path(__file__).parent / "snapshot"
SNAPSHOT_META = SNAPSHOT_DIR / "snapshot.json"


@dataclass(frozen=True)
class CatalogSource:
    cloud: str
    kind: str  # 'catalog-dir' | 'cache' | 'snapshot'
    path: Path
    as_of: str | None  # when the prices were read (ISO 8601), when known
    origin: str | None = None  # URL or folder the file came from
    spot_overlay: Path | None = None  # live AWS spot prices applied on top, when present


def cache_paths(cache_dir: Path, cloud: str) -> tuple[Path, Path]:
    """(vms.csv, meta.json) of one cloud in the cache."""
    return cache_dir / cloud / "vms.csv", cache_dir / cloud / "meta.json"


def spot_overlay_path(cache_dir: Path) -> Path:
    return cache_dir / "aws" / "spot_overlay.csv"


def resolve_sources(catalog_dir: Path | None, cache_dir: Path | None) -> dict[str, CatalogSource]:
    """Each cloud's catalog: the catalog folder's, else the cache's (`cache_dir`, None for none), else the snapshot."""
    if catalog_dir is not None:
        return _from_catalog_dir(Path(catalog_dir))
    out: dict[str, CatalogSource] = {}
    snapshot = _snapshot_meta()
    overlay = spot_overlay_path(cache_dir) if cache_dir is not None else None
    for cloud in SUPPORTED_CLOUDS:
        extra = overlay if cloud == "aws" and overlay is not None and overlay.is_file() else None
        vms, meta_path = cache_paths(cache_dir, cloud) if cache_dir is not None else (None, None)
        if vms is not None and vms.is_file():
            meta = _read_json(meta_path)
            out[cloud] = CatalogSource(cloud, "cache", vms, meta.get("fetched_at"), meta.get("url"), extra)
            continue
        snap = SNAPSHOT_DIR / f"{cloud}_vms.csv"
        if snap.is_file():
            info = snapshot.get("clouds", {}).get(cloud, {})
            out[cloud] = CatalogSource(
                cloud, "snapshot", snap, snapshot.get("as_of"), info.get("origin") or snapshot.get("origin"), extra
            )
    return out


def _from_catalog_dir(catalog_dir: Path) -> dict[str, CatalogSource]:
    if not catalog_dir.is_dir():
        raise PricingInputError(f"catalog folder {str(catalog_dir)!r} does not exist")
    out: dict[str, CatalogSource] = {}
    for sub in sorted(p for p in catalog_dir.iterdir() if p.is_dir()):
        vms = sub / "vms.csv"
        if vms.is_file():
            mtime = datetime.fromtimestamp(vms.stat().st_mtime, UTC).isoformat(timespec="seconds")
            out[sub.name.lower()] = CatalogSource(sub.name.lower(), "catalog-dir", vms, mtime, str(catalog_dir))
    if not out:
        raise PricingInputError(
            f"catalog folder {str(catalog_dir)!r} holds no <cloud>/vms.csv", hint="expected e.g. DIR/aws/vms.csv"
        )
    return out


def _snapshot_meta() -> dict:
    return _read_json(SNAPSHOT_META)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True)
class CloudCatalogStatus:
    cloud: str
    kind: str
    path: str
    as_of: str | None
    age_hours: float | None
    origin: str | None
    spot_overlay: str | None  # fetched-at of live AWS spot prices in use, if any


def catalog_status(catalog_dir: Path | None, cache_dir: Path, now: datetime | None = None) -> list[CloudCatalogStatus]:
    """Source and age of each cloud's catalog as `load_catalog` would resolve it now."""
    now = now or datetime.now(UTC)
    out = []
    for cloud, src in sorted(resolve_sources(catalog_dir, cache_dir).items()):
        overlay = None
        if src.spot_overlay is not None:
            overlay = _read_json(src.spot_overlay.with_suffix(".meta.json")).get("fetched_at") or "present"
        out.append(
            CloudCatalogStatus(
                cloud, src.kind, str(src.path), src.as_of, _age_hours(src.as_of, now), src.origin, overlay
            )
        )
    return out


def _age_hours(as_of: str | None, now: datetime) -> float | None:
    if not as_of:
        return None
    try:
        t = datetime.fromisoformat(as_of)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return round((now - t).total_seconds() / 3600.0, 2)
