"""Parsing quirks of SkyPilot vms.csv files."""

import math

import pytest

from pricing.errors import PricingInputError as BadInputError
from pricing.catalog import normalize_cloud
from pricing.vms_csv import read_vms_csv
from tests.pricing.helpers import AWS_V7_HEADER, fnum, raw_rows, write_csv

V7_AWS = list(AWS_V7_HEADER)
GPUINFO = "{'Gpus': [{'Name': 'A10G', 'Manufacturer': 'NVIDIA', 'Count': 4, 'MemoryInfo': {'SizeInMiB': 22888}}], 'TotalGpuMemoryInMiB': 91552}"
ROW = ["g5.12xlarge", "A10G", "4.0", "48.0", "192.0", GPUINFO, "5.672", "2.1", "us-east-1", "use1-az1"]


def test_column_order_and_crlf_do_not_matter(tmp_path):
    a = read_vms_csv(write_csv(tmp_path / "a.csv", V7_AWS, [ROW]))
    order = list(reversed(range(len(V7_AWS))))
    b = read_vms_csv(
        write_csv(tmp_path / "b.csv", [V7_AWS[i] for i in order], [[ROW[i] for i in order]], newline="\r\n")
    )
    assert a.to_dict("records") == b.to_dict("records")
    rec = a.iloc[0]
    assert rec["instance_type"] == "g5.12xlarge" and rec["zone"] == "use1-az1"
    assert rec["accelerator"] == "A10G" and rec["accelerator_count"] == 4
    assert rec["price"] == 5.672 and rec["spot_price"] == 2.1
    assert rec["gpu_memory_gib"] == pytest.approx(4 * 22888 / 1024)


def test_v8_extra_columns_are_ignored(tmp_path):
    header = [
        *V7_AWS,
        "Arch",
        "LocalDiskType",
        "NVMeSupported",
        "LocalDiskSize",
        "LocalDiskCount",
        "MaximumEfaInterfaces",
    ]
    df = read_vms_csv(write_csv(tmp_path / "v8.csv", header, [[*ROW, "x86_64", "ssd", "True", "3800", "1", ""]]))
    assert list(df["instance_type"]) == ["g5.12xlarge"] and df.iloc[0]["price"] == 5.672


def test_optional_columns_missing(tmp_path):
    # v7 RunPod: no AvailabilityZone; Lambda: no SpotPrice values.
    header = ["InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region"]
    df = read_vms_csv(write_csv(tmp_path / "min.csv", header, [["1x_H100", "H100", "1", "2.99", "US"]]))
    rec = df.iloc[0]
    assert rec["zone"] is None or (isinstance(rec["zone"], float) and math.isnan(rec["zone"]))
    assert math.isnan(rec["spot_price"]) and math.isnan(rec["vcpus"])


def test_empty_prices_give_no_offer_rows(tmp_path):
    rows = [
        ["g5.xlarge", "A10G", "1", "4", "16", "", "1.0", "", "us-east-1", "use1-az1"],  # no spot
        ["g5.xlarge", "A10G", "1", "4", "16", "", "", "0.5", "us-east-1", "use1-az2"],  # no on-demand
        ["g5.xlarge", "A10G", "1", "4", "16", "", "0", "0.4", "us-east-1", "use1-az3"],  # price 0 = none
    ]
    raw = read_vms_csv(write_csv(tmp_path / "e.csv", V7_AWS, rows))
    offers = normalize_cloud("aws", raw)
    got = sorted(
        (z, s, p) for z, s, p in zip(offers["zone"], offers["spot"], offers["price_usd_per_hour"], strict=True)
    )
    assert got == [("use1-az1", False, 1.0), ("use1-az2", True, 0.5), ("use1-az3", True, 0.4)]
    spot_az2 = offers[(offers["zone"] == "use1-az2")].iloc[0]
    assert math.isnan(spot_az2["on_demand_price_usd_per_hour"])


def test_missing_required_column_is_bad_input(tmp_path):
    p = write_csv(tmp_path / "bad.csv", ["InstanceType", "Price"], [["x", "1"]])
    with pytest.raises(BadInputError, match="missing columns"):
        read_vms_csv(p, label="aws catalog")


@pytest.mark.parametrize("cloud", ["aws", "gcp", "lambda", "runpod"])
def test_real_slices_parse_row_for_row(shared_data, cloud):
    path = shared_data / "catalog" / f"{cloud}_vms_slice.csv"
    rows = raw_rows(path)
    df = read_vms_csv(path)
    assert len(df) == len(rows)
    for rec, row in zip(df.to_dict("records"), rows, strict=True):
        assert (rec["price"] if not math.isnan(rec["price"]) else None) == fnum(row["Price"])
        assert (rec["spot_price"] if not math.isnan(rec["spot_price"]) else None) == fnum(row.get("SpotPrice", ""))
        assert rec["region"] == row["Region"]


def test_crlf_slices_really_are_crlf(shared_data):
    # The lambda and runpod slices keep the source's CRLF: the parse test above covers it.
    assert b"\r\n" in (shared_data / "catalog" / "lambda_vms_slice.csv").read_bytes()[:400]
    assert b"\r\n" in (shared_data / "catalog" / "runpod_vms_slice.csv").read_bytes()[:400]


def test_gpu_memory_from_gpuinfo_and_name(shared_data):
    lam = normalize_cloud("lambda", read_vms_csv(shared_data / "catalog" / "lambda_vms_slice.csv"))
    a100x8 = lam[(lam["instance_type"] == "gpu_8x_a100")].iloc[0]
    # Lambda's TotalGpuMemoryInMiB is one GPU's size; total must be per-GPU size x count.
    assert a100x8["gpu_memory_gib"] == pytest.approx(8 * 40)
    rp = normalize_cloud("runpod", read_vms_csv(shared_data / "catalog" / "runpod_vms_slice.csv"))
    h = rp[rp["instance_type"] == "8x_H100_SECURE"].iloc[0]  # GpuInfo is a bare name here
    assert h["gpu_memory_gib"] == pytest.approx(8 * 80)


def test_azure_layout_without_zone_with_generation(tmp_path):
    header = ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo", "Price"]
    header += ["SpotPrice", "Region", "Generation"]
    gpu = "{'Gpus': [{'Name': 'A100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}]}"
    rows = [["Standard_ND96amsr_A100_v4", "A100-80GB", "8", "96", "1900", gpu, "32.77", "13.1", "eastus", "V2"]]
    offers = normalize_cloud("azure", read_vms_csv(write_csv(tmp_path / "az.csv", header, rows)))
    assert sorted(offers["spot"]) == [False, True]
    assert set(offers["zone"].isna()) == {True}
    assert set(offers["gpu_memory_gib"]) == {8 * 80.0}
    assert set(offers["accelerator_family"]) == {"A100-80GB"}
