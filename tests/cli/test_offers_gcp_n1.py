"""GCP GPUs sold on N1 hosts (T4, V100, P100): the cheapest offers, computed here from the raw rows.

The oracle reads the CSV rows with the csv module and applies SkyPilot's host rules as written
in sky/catalog/gcp_catalog.py (0.14.1), copied out below rather than imported: an accelerator
row pairs with an n1-standard/n1-highmem/n1-highcpu VM in the same zone that has at least the
default vCPUs for that count (_NUM_ACC_TO_NUM_CPU) and 4 GiB per default vCPU, no more than the
count can attach to (_NUM_ACC_TO_MAX_CPU_AND_MEMORY), the cheapest by on-demand price; the
offer's price is host + accelerators (spot: host spot + accelerator spot).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli
from tests.pricing.helpers import fnum, raw_rows

DEFAULT_VCPUS = {("T4", 1): 4, ("V100", 1): 8, ("P100", 4): 32}
MAX_HOST = {("T4", 1): (48, 312), ("V100", 1): (12, 78), ("P100", 4): (96, 624)}
MAX_HOST_ZONE = {("P100", 4, z): (64, 208) for z in ("us-east1-c", "europe-west1-d", "europe-west1-b")}


def oracle(rows: list[dict[str, str]], acc: str, count: int) -> dict[bool, tuple[float, set[tuple[str, str]]]]:
    """{spot: (cheapest price, {(zone, host) at that price})} over every zone of the raw rows."""
    hosts: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        if r["InstanceType"].startswith(("n1-standard-", "n1-highmem-", "n1-highcpu-")) and fnum(r["Price"]):
            hosts.setdefault(r["AvailabilityZone"], []).append(r)
    need = DEFAULT_VCPUS[(acc, count)]
    found: dict[bool, list[tuple[float, str, str]]] = {False: [], True: []}
    for a in rows:
        if a["InstanceType"] or a["AcceleratorName"] != acc or int(float(a["AcceleratorCount"])) != count:
            continue
        zone = a["AvailabilityZone"]
        max_cpu, max_mem = MAX_HOST_ZONE.get((acc, count, zone), MAX_HOST[(acc, count)])
        fits = [
            h
            for h in hosts.get(zone, [])
            if need <= float(h["vCPUs"]) <= max_cpu and 4 * need <= float(h["MemoryGiB"]) <= max_mem
        ]
        if not fits:
            continue
        host = min(fits, key=lambda h: float(h["Price"]))
        for spot, col in ((False, "Price"), (True, "SpotPrice")):
            hp, ap = fnum(host[col]), fnum(a[col])
            if hp is not None and ap is not None:
                found[spot].append((hp + ap, zone, host["InstanceType"]))
    out = {}
    for spot, items in found.items():
        best = min(p for p, _, _ in items)
        out[spot] = (best, {(z, h) for p, z, h in items if abs(p - best) < 1e-9})
    return out


@pytest.fixture(scope="module")
def gcp_rows(shared_data):
    d = shared_data / "catalog"
    return raw_rows(d / "gcp_vms_slice.csv") + raw_rows(d / "gcp_n1_hosts_slice.csv")


@pytest.fixture(scope="module")
def gcp_catalog_dir(shared_data, tmp_path_factory):
    """The slice plus the N1 host rows as one vms.csv (the data rows appended, same header)."""
    d = shared_data / "catalog"
    out = tmp_path_factory.mktemp("gcp-n1") / "gcp"
    out.mkdir()
    shutil.copyfile(d / "gcp_vms_slice.csv", out / "vms.csv")
    with open(out / "vms.csv", "a", encoding="utf-8") as f:
        f.write("".join((d / "gcp_n1_hosts_slice.csv").read_text(encoding="utf-8").splitlines(True)[1:]))
    return out.parent


@pytest.mark.parametrize("shape", [("T4", 1), ("V100", 1), ("P100", 4)])
@pytest.mark.parametrize("source", ["snapshot", "catalog-dir"])
def test_cheapest_n1_offer_matches_the_raw_rows(gcp_rows, gcp_catalog_dir, shape, source):
    acc, count = shape
    want = oracle(gcp_rows, acc, count)
    where = [] if source == "snapshot" else ["--catalog-dir", str(gcp_catalog_dir)]
    for spot, flag in ((False, "--on-demand"), (True, "--spot")):
        p = run_cli(*where, "offers", "--gpus", f"{acc}:{count}", "--cloud", "gcp", flag, "--json", "--limit", "0")
        assert p.returncode == 0, p.stderr
        got = json.loads(p.stdout)
        assert got, f"no GCP {acc}:{count} offer"
        first = got[0]
        price, best = want[spot]
        assert first["price_usd_per_hour"] == pytest.approx(price, abs=1e-9)
        assert (first["zone"], first["instance_type"]) in best
        assert first["spot"] is spot and first["accelerator"] == acc and first["accelerator_count"] == count
        assert first["instance_type"].startswith("n1-")
        # every tie for the cheapest price is listed, nothing cheaper
        cheapest = {(o["zone"], o["instance_type"]) for o in got if abs(o["price_usd_per_hour"] - price) < 1e-9}
        assert cheapest == best
        assert min(o["price_usd_per_hour"] for o in got) == pytest.approx(price, abs=1e-9)


def test_oracle_hosts_by_hand(gcp_rows):
    # T4:1 needs >= 4 vCPUs and >= 16 GiB: n1-standard-4 has 15 GiB, so n1-highmem-4 (26 GiB) it is.
    assert {h for _, h in oracle(gcp_rows, "T4", 1)[False][1]} == {"n1-highmem-4"}
    # P100:4 needs >= 32 vCPUs and >= 128 GiB: n1-standard-32 has 120 GiB, n1-highmem-32 208 GiB.
    assert {h for _, h in oracle(gcp_rows, "P100", 4)[False][1]} == {"n1-highmem-32"}
