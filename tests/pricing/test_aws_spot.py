"""Live spot price overlay against a real moto_server (moto's prices are placeholders: the test
asserts that exactly what EC2 answered lands in the catalog)."""

import shutil

import boto3
import pytest

from pricing.aws_spot import refresh_spot_overlay
from pricing.catalog import load_catalog
from tests.pricing.helpers import raw_rows

REGIONS = ["us-east-1", "ap-south-1"]
TYPES = ["p5.48xlarge", "g5.xlarge"]


def test_overlay_lands_in_catalog(aws_env, shared_data, tmp_path):
    cache = tmp_path / "cache"
    (cache / "aws").mkdir(parents=True)
    src = shared_data / "catalog" / "aws_vms_slice.csv"
    shutil.copyfile(src, cache / "aws" / "vms.csv")

    res = refresh_spot_overlay(regions=REGIONS, instance_types=TYPES, cache_dir=cache)
    assert res.ok

    # What EC2 (moto) says, asked independently: latest price per (zone id, type).
    live = {}
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
        for h in ec2.describe_spot_price_history(InstanceTypes=TYPES)["SpotPriceHistory"]:
            live[(h["InstanceType"], ids[h["AvailabilityZone"]])] = float(h["SpotPrice"])
    assert live

    offers = load_catalog(cache_dir=cache, risk_file=tmp_path / "none.yaml").offers
    spot = offers[(offers["cloud"] == "aws") & offers["spot"]]
    got = {(r.instance_type, r.zone): r.price_usd_per_hour for r in spot.itertuples()}
    rows = raw_rows(src)
    overlaid = untouched = 0
    for row in rows:
        key = (row["InstanceType"], row["AvailabilityZone"])
        if key in live:
            assert got[key] == pytest.approx(live[key])
            overlaid += 1
        elif row["SpotPrice"] and key in got:
            assert got[key] == pytest.approx(float(row["SpotPrice"]))
            untouched += 1
    assert overlaid > 0 and untouched > 0


def test_overlay_cli(aws_env, shared_data, tmp_path, launcher_home):
    from tests.conftest import run_cli

    cache = launcher_home / "catalogs"
    (cache / "aws").mkdir(parents=True)
    shutil.copyfile(shared_data / "catalog" / "aws_vms_slice.csv", cache / "aws" / "vms.csv")
    p = run_cli(
        "catalog",
        "refresh",
        "--clouds",
        "aws",
        "--url",
        "http://127.0.0.1:9/none",
        "--timeout",
        "2",
        "--no-advisor",
        "--aws-spot-prices",
        "--regions",
        "us-east-1",
        "--json",
    )
    # the catalog download fails (nothing listens on port 9) but the spot overlay works; exit 5 names aws
    assert p.returncode == 5, p.stderr
    assert "refresh failed for aws (cached copy kept)" in p.stderr
    assert (cache / "aws" / "spot_overlay.csv").is_file()
    st = run_cli("catalog", "status", "--json")
    aws = [s for s in __import__("json").loads(st.stdout) if s["cloud"] == "aws"][0]
    assert aws["kind"] == "cache" and aws["spot_overlay"]
