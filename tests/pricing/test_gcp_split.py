"""GCP split pricing, checked against sums computed here from the raw slice with the csv module."""

import pytest

from pricing.catalog import normalize_cloud
from pricing.vms_csv import read_vms_csv
from tests.pricing.helpers import fnum, raw_rows, write_csv

# Written out here (not imported) so the test is independent of the code under test.
HOSTS = {
    ("A100", 8): ["a2-highgpu-8g"],
    ("A100", 1): ["a2-highgpu-1g"],
    ("A100-80GB", 4): ["a2-ultragpu-4g"],
    ("H100", 8): ["a3-highgpu-8g"],
    ("H100-MEGA", 8): ["a3-megagpu-8g"],
    ("L4", 1): ["g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"],
    ("L4", 2): ["g2-standard-24"],
}


@pytest.fixture(scope="module")
def gcp(shared_data):
    path = shared_data / "catalog" / "gcp_vms_slice.csv"
    return raw_rows(path), normalize_cloud("gcp", read_vms_csv(path))


def expected_offers(rows, acc, count):
    hosts = {(r["InstanceType"], r["AvailabilityZone"]): r for r in rows if r["InstanceType"]}
    out = {}
    for r in rows:
        if r["InstanceType"] or r["AcceleratorName"] != acc or int(float(r["AcceleratorCount"])) != count:
            continue
        for host in HOSTS[(acc, count)]:
            h = hosts.get((host, r["AvailabilityZone"]))
            if h is None:
                continue
            for spot, col in ((False, "Price"), (True, "SpotPrice")):
                hp, ap = fnum(h[col]), fnum(r[col])
                if hp is not None and ap is not None and hp + ap > 0:
                    out[(r["Region"], r["AvailabilityZone"], host, spot)] = hp + ap
    return out


@pytest.mark.parametrize("shape", list(HOSTS))
def test_offer_price_is_host_plus_accelerators(gcp, shape):
    rows, offers = gcp
    acc, count = shape
    want = expected_offers(rows, acc, count)
    assert want, f"slice has no {acc}:{count} rows"
    got_df = offers[(offers["accelerator"] == acc) & (offers["accelerator_count"] == count)]
    got = {(r.region, r.zone, r.instance_type, bool(r.spot)): r.price_usd_per_hour for r in got_df.itertuples()}
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12)


def test_a100x8_us_central1_by_hand(gcp):
    _, offers = gcp
    row = offers[
        (offers["accelerator"] == "A100")
        & (offers["accelerator_count"] == 8)
        & (offers["zone"] == "us-central1-a")
        & ~offers["spot"]
    ].iloc[0]
    # a2-highgpu-8g 5.91582 + A100 x8 23.47126 (both read from the slice by eye)
    assert row["instance_type"] == "a2-highgpu-8g"
    assert row["price_usd_per_hour"] == pytest.approx(5.91582 + 23.47126)
    assert row["vcpus"] == 96 and row["memory_gib"] == 680
    assert row["gpu_memory_gib"] == pytest.approx(8 * 40)


def test_hosts_are_not_offered_alone_and_orphans_dropped(gcp):
    rows, offers = gcp
    assert offers["accelerator"].notna().all()  # no bare a2/a3/g2 hosts, no CPU rows in the slice
    # T4/V100/P100/P4 need N1 hosts, which the slice does not have: no offers rather than wrong ones.
    assert not offers["accelerator"].isin(["T4", "V100", "P100", "P4"]).any()


def test_n1_hosts_for_t4(tmp_path):
    header = [
        "InstanceType",
        "vCPUs",
        "MemoryGiB",
        "AcceleratorName",
        "AcceleratorCount",
        "GpuInfo",
        "Region",
        "AvailabilityZone",
        "Price",
        "SpotPrice",
    ]
    rows = [
        ["n1-standard-2", "2", "7.5", "", "", "", "us-east1", "us-east1-b", "0.09", "0.02"],
        ["n1-standard-4", "4", "15", "", "", "", "us-east1", "us-east1-b", "0.19", "0.04"],  # 15 < 4*4 GiB
        ["n1-highmem-4", "4", "26", "", "", "", "us-east1", "us-east1-b", "0.23", "0.05"],
        ["n1-highmem-8", "8", "52", "", "", "", "us-east1", "us-east1-b", "0.47", "0.10"],
        ["", "", "", "T4", "1", "", "us-east1", "us-east1-b", "0.35", "0.14"],
        ["", "", "", "T4", "1", "", "us-east1", "us-east1-c", "0.35", "0.14"],  # no host in that zone
    ]
    offers = normalize_cloud("gcp", read_vms_csv(write_csv(tmp_path / "g.csv", header, rows)))
    t4 = offers[offers["accelerator"] == "T4"].sort_values("spot")
    assert list(t4["instance_type"]) == ["n1-highmem-4", "n1-highmem-4"]
    assert list(t4["price_usd_per_hour"]) == pytest.approx([0.23 + 0.35, 0.05 + 0.14])
    # plain N1 VMs remain as CPU offers
    assert set(offers[offers["accelerator"].isna()]["instance_type"]) == {
        "n1-standard-2",
        "n1-standard-4",
        "n1-highmem-4",
        "n1-highmem-8",
    }
