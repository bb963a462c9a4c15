"""`launcher catalog refresh`: download public SkyPilot catalogs (and the AWS Spot Advisor feed)
into the local cache.

Every request has a timeout; a download is validated (it must parse as a vms.csv) before it
replaces the cached copy; files are written atomically under a file lock; when a cloud fails,
its cached copy stays and the failure is reported. A meta.json per cloud records the source
URL, the fetch time and the sha256 of the bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pricing.atomic import atomic_write_bytes, atomic_write_text
from pricing.errors import PricingBusyError, PricingError
from pricing.risk import ADVISOR_FEED_URL, derive_advisor_table
from pricing.sources import SUPPORTED_CLOUDS, cache_paths
from pricing.vms_csv import read_vms_csv

DEFAULT_BASE_URLS = (
    "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs",
    "https://skypilot-catalog.s3.us-east-1.amazonaws.com/catalogs",  # SkyPilot's mirror
)
DEFAULT_SCHEMA = "v8"
LOCK_NAME = ".refresh.lock"


@dataclass(frozen=True)
class FetchResult:
    name: str  # cloud, or 'aws-spot-advisor' / 'aws-spot-prices'
    ok: bool
    url: str | None
    detail: str  # rows/sha on success, the error on failure
    kept_cached: bool = False  # failure, but an older cached copy is still in use
    fetched_at: str | None = None


@dataclass(frozen=True)
class RefreshResult:
    cache_dir: Path
    results: tuple[FetchResult, ...]

    @property
    def failed(self) -> tuple[FetchResult, ...]:
        return tuple(r for r in self.results if not r.ok)


def _now_iso(clock: Callable[[], datetime] | None) -> str:
    return (clock or (lambda: datetime.now(UTC)))().isoformat(timespec="seconds")


def lock(cache_dir: Path, timeout_s: float = 60.0):
    """The cache's file lock (one refresh at a time)."""
    from filelock import FileLock

    cache_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(cache_dir / LOCK_NAME), timeout=timeout_s)


def refresh_catalogs(
    *,
    base_url: str | None = None,
    schema: str = DEFAULT_SCHEMA,
    clouds: Sequence[str] | None = None,
    cache_dir: Path,
    timeout_s: float = 20.0,
    advisor_url: str | None = ADVISOR_FEED_URL,
    lock_timeout_s: float = 60.0,
    clock: Callable[[], datetime] | None = None,
) -> RefreshResult:
    """Fetch `<base>/<schema>/<cloud>/vms.csv` for each cloud (and the advisor feed) into the cache."""
    import httpx
    from filelock import Timeout

    base_url = base_url or os.environ.get("LAUNCHER_CATALOG_URL")
    bases = (base_url.rstrip("/"),) if base_url else DEFAULT_BASE_URLS
    results: list[FetchResult] = []
    try:
        with lock(cache_dir, lock_timeout_s), httpx.Client(timeout=timeout_s, follow_redirects=True) as client:
            for cloud in clouds or SUPPORTED_CLOUDS:
                results.append(_refresh_cloud(client, cloud, bases, schema, cache_dir, clock))
            if advisor_url:
                results.append(_refresh_advisor(client, advisor_url, cache_dir, clock))
    except Timeout:
        raise PricingBusyError(f"another catalog refresh holds {cache_dir / LOCK_NAME}") from None
    return RefreshResult(cache_dir, tuple(results))


def _get(client, url: str) -> bytes:
    import httpx

    try:
        resp = client.get(url)
    except httpx.HTTPError as e:
        raise _FetchError(f"{type(e).__name__}: {e}") from e
    if resp.status_code != 200:
        raise _FetchError(f"HTTP {resp.status_code}")
    return resp.content


class _FetchError(Exception):
    pass


def _refresh_cloud(client, cloud: str, bases, schema: str, cache_dir: Path, clock) -> FetchResult:
    vms_path, meta_path = cache_paths(cache_dir, cloud)
    errors = []
    for base in bases:
        url = f"{base}/{schema}/{cloud}/vms.csv"
        try:
            data = _get(client, url)
            df = read_vms_csv(data, label=url)  # validates before anything is replaced
        except (_FetchError, PricingError, ValueError) as e:
            errors.append(f"{url}: {e}")
            continue
        sha = hashlib.sha256(data).hexdigest()
        fetched_at = _now_iso(clock)
        atomic_write_bytes(vms_path, data)
        meta = {"cloud": cloud, "url": url, "schema": schema, "fetched_at": fetched_at, "sha256": sha, "rows": len(df)}
        atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
        return FetchResult(cloud, True, url, f"{len(df)} rows, sha256 {sha[:12]}", fetched_at=fetched_at)
    return FetchResult(cloud, False, None, "; ".join(errors), kept_cached=vms_path.is_file())


def _refresh_advisor(client, url: str, cache_dir: Path, clock) -> FetchResult:
    out = cache_dir / "aws" / "spot_advisor.csv"
    try:
        data = _get(client, url)
        table = derive_advisor_table(json.loads(data))
        if table.empty:
            raise _FetchError("feed has no GPU instance types")
    except (_FetchError, ValueError, KeyError, TypeError, AttributeError) as e:
        return FetchResult("aws-spot-advisor", False, url, f"{url}: {e}", kept_cached=out.is_file())
    csv = table.to_csv(index=False, lineterminator="\n").encode()
    fetched_at = _now_iso(clock)
    atomic_write_bytes(out, csv)
    meta = {"url": url, "fetched_at": fetched_at, "sha256": hashlib.sha256(data).hexdigest(), "rows": len(table)}
    atomic_write_text(cache_dir / "aws" / "spot_advisor.meta.json", json.dumps(meta, indent=2) + "\n")
    return FetchResult("aws-spot-advisor", True, url, f"{len(table)} GPU rows", fetched_at=fetched_at)
