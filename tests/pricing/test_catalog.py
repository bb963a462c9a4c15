"""Catalog loading: source resolution, the parsed cache and its invalidation, the snapshot."""

import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from pricing import sources
from pricing.catalog import clear_process_cache, load_catalog
from tests.conftest import REPO
from tests.pricing.helpers import raw_rows, write_csv

HEADER = [
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "SpotPrice",
    "Region",
    "AvailabilityZone",
]


def test_sources_catalog_dir_cache_snapshot(tmp_path):
    cache = tmp_path / "cache"
    write_csv(
        cache / "lambda" / "vms.csv", HEADER, [["gpu_1x_h100", "H100", "1", "26", "200", "2.49", "", "us-east-1", ""]]
    )
    (cache / "lambda" / "meta.json").write_text(
        json.dumps({"fetched_at": "2026-11-29T10:00:00+00:00", "url": "http://x"})
    )
    res = sources.resolve_sources(None, cache)
    assert res["lambda"].kind == "cache" and res["lambda"].as_of == "2026-11-29T10:00:00+00:00"
    assert res["aws"].kind == "snapshot" and res["aws"].as_of == "2026-11-30"
    d = tmp_path / "dir"
    write_csv(
        d / "aws" / "vms.csv",
        HEADER,
        [["p5.48xlarge", "H100", "8", "192", "2048", "98.32", "", "us-east-1", "use1-az1"]],
    )
    only = sources.resolve_sources(d, cache)
    assert list(only) == ["aws"] and only["aws"].kind == "catalog-dir"


def test_parsed_cache_is_invalidated_by_file_change(tmp_path):
    d = tmp_path / "dir"
    f = write_csv(
        d / "aws" / "vms.csv",
        HEADER,
        [["p5.48xlarge", "H100", "8", "192", "2048", "98.32", "", "us-east-1", "use1-az1"]],
    )
    cache = tmp_path / "cache"
    first = load_catalog(d, cache_dir=cache)
    assert list(first.offers["price_usd_per_hour"]) == [98.32]
    assert list((cache / ".parsed").glob("*.pkl"))
    clear_process_cache()
    write_csv(f, HEADER, [["p5.48xlarge", "H100", "8", "192", "2048", "90.5", "", "us-east-1", "use1-az1"]])
    assert list(load_catalog(d, cache_dir=cache).offers["price_usd_per_hour"]) == [90.5]
    # a torn or foreign pickle is ignored, not trusted
    for p in (cache / ".parsed").glob("*.pkl"):
        p.write_bytes(b"garbage")
    clear_process_cache()
    assert list(load_catalog(d, cache_dir=cache).offers["price_usd_per_hour"]) == [90.5]


def test_snapshot_is_what_the_script_builds(shared_data, tmp_path):
    d = shared_data / "catalog"
    out = tmp_path / "snap"
    args = [f"--file={c}={d}/{c}_vms_slice.csv" for c in ("aws", "gcp", "lambda", "runpod")]
    args.append(f"--file=gcp={d}/gcp_n1_hosts_slice.csv")  # GCP's N1 hosts, appended to its slice
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_snapshot.py"), *args, "--as-of", "2026-11-30",
         "--spot-advisor", str(shared_data / "spot-advisor-data.json"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    shipped = sources.SNAPSHOT_DIR
    for name in ("aws_vms.csv", "gcp_vms.csv", "lambda_vms.csv", "runpod_vms.csv", "aws_spot_advisor.csv"):
        assert (
            hashlib.sha256((out / name).read_bytes()).digest() == hashlib.sha256((shipped / name).read_bytes()).digest()
        ), name
    meta = json.loads((shipped / "snapshot.json").read_text())
    assert meta["as_of"] == "2026-11-30"
    # GPU rows only: lambda's CPU type is gone, every row names an accelerator or is a GCP GPU host
    rows = raw_rows(shipped / "lambda_vms.csv")
    assert rows and all(r["AcceleratorName"] for r in rows)
    assert len(rows) == sum(1 for r in raw_rows(d / "lambda_vms_slice.csv") if r["AcceleratorName"])
    # GCP: every row of its slice (all GPU rows or GPU hosts) followed by every N1 host row
    gcp = raw_rows(shipped / "gcp_vms.csv")
    assert gcp == raw_rows(d / "gcp_vms_slice.csv") + raw_rows(d / "gcp_n1_hosts_slice.csv")
    assert meta["clouds"]["gcp"]["rows"] == len(gcp) == 1271 + 871


def test_snapshot_loads_offline(tmp_path):
    cat = load_catalog(cache_dir=tmp_path / "empty")
    assert set(cat.sources) == {"aws", "gcp", "lambda", "runpod"}
    assert {s.kind for s in cat.sources.values()} == {"snapshot"}
    assert (cat.offers["accelerator"].notna()).all()


def test_catalog_dir_without_catalogs_is_bad_input(tmp_path):
    from pricing.errors import PricingInputError as BadInputError

    (tmp_path / "x").mkdir()
    with pytest.raises(BadInputError, match="holds no"):
        load_catalog(tmp_path / "x", cache_dir=tmp_path / "c")
    shutil.rmtree(tmp_path / "x")
    with pytest.raises(BadInputError, match="does not exist"):
        load_catalog(tmp_path / "x", cache_dir=tmp_path / "c")
