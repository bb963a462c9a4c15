"""GCP split pricing: a GPU offer is a host VM row plus an accelerator-only row.

GCP's catalog lists GPUs as rows with an empty InstanceType whose Price/SpotPrice is the price of
`AcceleratorCount` GPUs in that zone. An offer's price is host + accelerators, in the same zone:
`A100:8` = `a2-highgpu-8g` + the `A100 x8` row; `L4:1` = `g2-standard-{4,8,12,16,32}` + `L4 x1`.
GPUs that attach to general-purpose N1 hosts (T4, V100, P100, P4, K80) get the cheapest N1 VM
in the same zone with at least SkyPilot's default vCPUs for that count and 4 GiB of memory per
default vCPU, and no more than the count can attach to, when N1 rows exist (as SkyPilot's
gcp_catalog picks hosts: by on-demand price).
Host rows of GPU-only families (a2/a3/a4/g2/g4) are not offered on their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Same pairing as SkyPilot's gcp_catalog (_ACC_INSTANCE_TYPE_DICTS): accelerator -> count -> hosts.
GCP_HOSTS: dict[str, dict[int, tuple[str, ...]]] = {
    "A100": {
        1: ("a2-highgpu-1g",),
        2: ("a2-highgpu-2g",),
        4: ("a2-highgpu-4g",),
        8: ("a2-highgpu-8g",),
        16: ("a2-megagpu-16g",),
    },
    "A100-80GB": {1: ("a2-ultragpu-1g",), 2: ("a2-ultragpu-2g",), 4: ("a2-ultragpu-4g",), 8: ("a2-ultragpu-8g",)},
    "L4": {
        1: ("g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"),
        2: ("g2-standard-24",),
        4: ("g2-standard-48",),
        8: ("g2-standard-96",),
    },
    "H100": {1: ("a3-highgpu-1g",), 2: ("a3-highgpu-2g",), 4: ("a3-highgpu-4g",), 8: ("a3-highgpu-8g",)},
    "H100-MEGA": {8: ("a3-megagpu-8g",)},
    "H200": {8: ("a3-ultragpu-8g",)},
    "B200": {8: ("a4-highgpu-8g",)},
    "RTXPRO6000": {1: ("g4-standard-48",), 2: ("g4-standard-96",), 4: ("g4-standard-192",), 8: ("g4-standard-384",)},
}

# GPUs attached to N1 hosts: count -> default host vCPUs (SkyPilot's _NUM_ACC_TO_NUM_CPU).
N1_DEFAULT_VCPUS: dict[str, dict[int, int]] = {
    "K80": {1: 4, 2: 8, 4: 16, 8: 32, 16: 64},
    "V100": {1: 8, 2: 16, 4: 32, 8: 64},
    "T4": {1: 4, 2: 8, 4: 48},
    "P100": {1: 8, 2: 16, 4: 32, 8: 64},
    "P4": {1: 8, 2: 16, 4: 32},
}
# Largest N1 host (vCPUs, memory GiB) each count can attach to (SkyPilot's
# _NUM_ACC_TO_MAX_CPU_AND_MEMORY, from GCP's GPU documentation), with its per-zone exceptions.
N1_MAX_HOST: dict[str, dict[int, tuple[float, float]]] = {
    "K80": {1: (8, 52), 2: (16, 104), 4: (32, 208), 8: (64, 208)},
    "V100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
    "T4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "P4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "P100": {1: (16, 104), 2: (32, 208), 4: (96, 624)},
}
N1_MAX_HOST_ZONE: dict[tuple[str, int, str], tuple[float, float]] = {
    **{("K80", 8, z): (64, 416) for z in ("asia-east1-a", "us-east1-d")},
    **{("P100", 4, z): (64, 208) for z in ("us-east1-c", "europe-west1-d", "europe-west1-b")},
}
N1_FAMILIES = ("n1-standard-", "n1-highmem-", "n1-highcpu-")
GPU_ONLY_HOST_PREFIXES = ("a2-", "a3-", "a4-", "g2-", "g4-")
_KEY = ["region", "zone"]


def join_gcp(raw: pd.DataFrame) -> pd.DataFrame:
    """Turn a raw GCP frame into offers: host+accelerator rows, plus plain CPU VMs."""
    is_accel = raw["instance_type"].isna() & raw["accelerator"].notna()
    accel = raw[is_accel]
    vms = raw[raw["instance_type"].notna()]
    gpu_hosts = vms["instance_type"].str.startswith(GPU_ONLY_HOST_PREFIXES)
    cpu_vms = vms[~gpu_hosts & vms["accelerator"].isna()]
    parts = [cpu_vms, _join_fixed_hosts(accel, vms[gpu_hosts]), _join_n1_hosts(accel, vms)]
    # Rows that already carry their accelerator (older catalogs) are kept as they are.
    parts.append(vms[~gpu_hosts & vms["accelerator"].notna()])
    parts = [p for p in parts if len(p)]
    if not parts:
        return raw.iloc[0:0]
    return pd.concat(parts, ignore_index=True)[list(raw.columns)]


def _combine(acc_rows: pd.DataFrame, hosts: pd.DataFrame) -> pd.DataFrame:
    m = acc_rows.merge(hosts, on=["host", *_KEY], suffixes=("_acc", ""))
    return pd.DataFrame(
        {
            "instance_type": m["host"],
            "accelerator": m["accelerator_acc"],
            "accelerator_count": m["accelerator_count_acc"],
            "vcpus": m["vcpus"],
            "memory_gib": m["memory_gib"],
            "gpu_memory_gib": m["gpu_memory_gib_acc"],
            "region": m["region"],
            "zone": m["zone"],
            # NaN when either part has no price: no offer rather than a wrong one.
            "price": m["price"] + m["price_acc"],
            "spot_price": m["spot_price"] + m["spot_price_acc"],
        }
    )


def _join_fixed_hosts(accel: pd.DataFrame, hosts: pd.DataFrame) -> pd.DataFrame:
    pairs = pd.DataFrame(
        [(a, c, h) for a, by_count in GCP_HOSTS.items() for c, hs in by_count.items() for h in hs],
        columns=["accelerator", "accelerator_count", "host"],
    ).astype({"accelerator_count": accel["accelerator_count"].dtype})
    acc_rows = accel.merge(pairs, on=["accelerator", "accelerator_count"])
    h = hosts.rename(columns={"instance_type": "host"})
    return _combine(acc_rows, h)


def _join_n1_hosts(accel: pd.DataFrame, vms: pd.DataFrame) -> pd.DataFrame:
    n1 = vms[vms["instance_type"].str.startswith(N1_FAMILIES) & vms["price"].notna()]
    acc = accel[accel["accelerator"].isin(list(N1_DEFAULT_VCPUS))].copy()
    if n1.empty or acc.empty:
        return accel.iloc[0:0]
    acc["min_vcpus"] = [
        N1_DEFAULT_VCPUS[a].get(int(c), np.nan)
        for a, c in zip(acc["accelerator"], acc["accelerator_count"], strict=True)
    ]
    acc = acc[acc["min_vcpus"].notna()]
    limits = [
        N1_MAX_HOST_ZONE.get((a, int(c), z)) or N1_MAX_HOST.get(a, {}).get(int(c), (0, 0))
        for a, c, z in zip(acc["accelerator"], acc["accelerator_count"], acc["zone"], strict=True)
    ]
    # A count missing from N1_MAX_HOST (K80:16) cannot be attached at all: (0, 0) admits no host.
    acc["max_vcpus"] = [v for v, _ in limits]
    acc["max_memory_gib"] = [m for _, m in limits]
    acc["_row"] = np.arange(len(acc))
    cand = acc[["_row", *_KEY, "min_vcpus", "max_vcpus", "max_memory_gib"]].merge(
        n1[[*_KEY, "instance_type", "vcpus", "memory_gib", "price"]], on=_KEY
    )
    cand = cand[
        (cand["vcpus"] >= cand["min_vcpus"])
        & (cand["memory_gib"] >= 4 * cand["min_vcpus"])
        & (cand["vcpus"] <= cand["max_vcpus"])
        & (cand["memory_gib"] <= cand["max_memory_gib"])
    ]
    if cand.empty:
        return accel.iloc[0:0]
    # Cheapest qualifying N1 host per accelerator row; ties by name for determinism.
    best = cand.sort_values(["_row", "price", "instance_type"]).drop_duplicates("_row")
    acc = acc.merge(best[["_row", "instance_type"]].rename(columns={"instance_type": "host"}), on="_row")
    acc = acc.drop(columns=["min_vcpus", "max_vcpus", "max_memory_gib", "_row"])
    return _combine(acc, vms.rename(columns={"instance_type": "host"}))
