"""`catalog refresh` against a real local HTTP server serving the shared catalog slices."""

import hashlib
import json
import os
import socket

import pytest

from pricing.errors import PricingBusyError as ConflictError
from pricing.catalog import load_catalog
from pricing.refresh import lock, refresh_catalogs
from pricing.sources import catalog_status
from tests.pricing.helpers import SLICE_CLOUDS, StaticServer, serve_layout


@pytest.fixture
def served(data_dir, tmp_path):
    root = serve_layout(data_dir, tmp_path / "www")
    with StaticServer(root) as srv:
        yield srv, root


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_refresh_downloads_validates_and_records(served, tmp_path):
    srv, root = served
    cache = tmp_path / "cache"
    res = refresh_catalogs(
        base_url=srv.url + "/catalogs", cache_dir=cache, advisor_url=srv.url + "/spot-advisor-data.json", timeout_s=5
    )
    by = {r.name: r for r in res.results}
    for cloud in SLICE_CLOUDS:
        assert by[cloud].ok, by[cloud]
        src = (root / "catalogs" / "v8" / cloud / "vms.csv").read_bytes()
        assert (cache / cloud / "vms.csv").read_bytes() == src
        meta = json.loads((cache / cloud / "meta.json").read_text())
        assert meta["sha256"] == hashlib.sha256(src).hexdigest()
        assert meta["url"] == f"{srv.url}/catalogs/v8/{cloud}/vms.csv"
    # azure is not served: reported, nothing written
    assert not by["azure"].ok and "404" in by["azure"].detail and not by["azure"].kept_cached
    assert not (cache / "azure").exists()
    assert by["aws-spot-advisor"].ok and (cache / "aws" / "spot_advisor.csv").is_file()
    status = {s.cloud: s for s in catalog_status(None, cache)}
    assert {c: status[c].kind for c in SLICE_CLOUDS} == dict.fromkeys(SLICE_CLOUDS, "cache")
    cat = load_catalog(cache_dir=cache, risk_file=tmp_path / "none.yaml")
    assert cat.risk_source == "cache"
    assert {c: s.kind for c, s in cat.sources.items()} == dict.fromkeys(SLICE_CLOUDS, "cache")


def test_network_failure_keeps_cached_copy(served, tmp_path):
    srv, _ = served
    cache = tmp_path / "cache"
    refresh_catalogs(base_url=srv.url + "/catalogs", cache_dir=cache, clouds=["aws", "gcp"], advisor_url=None)
    before = {c: (cache / c / "vms.csv").read_bytes() for c in ("aws", "gcp")}
    meta_before = (cache / "aws" / "meta.json").read_text()
    res = refresh_catalogs(
        base_url=_closed_port_url(), cache_dir=cache, clouds=["aws", "gcp", "lambda"], advisor_url=None, timeout_s=2
    )
    by = {r.name: r for r in res.results}
    assert not any(r.ok for r in res.results)
    assert by["aws"].kept_cached and by["gcp"].kept_cached and not by["lambda"].kept_cached
    assert "ConnectError" in by["aws"].detail
    assert {c: (cache / c / "vms.csv").read_bytes() for c in ("aws", "gcp")} == before
    assert (cache / "aws" / "meta.json").read_text() == meta_before


def test_invalid_download_does_not_replace_cache(served, tmp_path):
    srv, root = served
    cache = tmp_path / "cache"
    refresh_catalogs(base_url=srv.url + "/catalogs", cache_dir=cache, clouds=["lambda"], advisor_url=None)
    good = (cache / "lambda" / "vms.csv").read_bytes()
    (root / "catalogs" / "v8" / "lambda" / "vms.csv").write_text("<html>rate limited</html>\n")
    res = refresh_catalogs(base_url=srv.url + "/catalogs", cache_dir=cache, clouds=["lambda"], advisor_url=None)
    assert not res.results[0].ok and res.results[0].kept_cached
    assert "missing columns" in res.results[0].detail
    assert (cache / "lambda" / "vms.csv").read_bytes() == good


def test_every_request_times_out(data_dir, tmp_path):
    root = serve_layout(data_dir, tmp_path / "www")
    # The server answers after 3 s; a request without the 0.3 s timeout would succeed, so a
    # "Timeout" failure is what shows the timeout cut it (no wall-clock assert: load varies).
    with StaticServer(root, delay_s=3.0) as srv:
        res = refresh_catalogs(
            base_url=srv.url + "/catalogs", cache_dir=tmp_path / "c", clouds=["aws"], advisor_url=None, timeout_s=0.3
        )
    assert not res.results[0].ok and "Timeout" in res.results[0].detail


def test_lock_held_is_conflict(tmp_path):
    cache = tmp_path / "cache"
    with lock(cache):
        with pytest.raises(ConflictError, match="another catalog refresh"):
            refresh_catalogs(base_url=_closed_port_url(), cache_dir=cache, lock_timeout_s=0.1)


def test_v7_schema_path(data_dir, tmp_path):
    root = serve_layout(data_dir, tmp_path / "www", schema="v7")
    with StaticServer(root) as srv:
        res = refresh_catalogs(
            base_url=srv.url + "/catalogs", schema="v7", cache_dir=tmp_path / "c", clouds=["runpod"], advisor_url=None
        )
    assert res.results[0].ok and res.results[0].url.endswith("/v7/runpod/vms.csv")


def test_env_url_is_used(served, tmp_path, monkeypatch):
    srv, _ = served
    monkeypatch.setenv("LAUNCHER_CATALOG_URL", srv.url + "/catalogs")
    res = refresh_catalogs(cache_dir=tmp_path / "c", clouds=["aws"], advisor_url=None)
    assert res.results[0].ok and res.results[0].url.startswith(srv.url)
    assert os.environ["LAUNCHER_CATALOG_URL"]
