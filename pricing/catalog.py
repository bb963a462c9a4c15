"""The offers catalog: every cloud's vms.csv normalized into one DataFrame, loaded lazily.

One row per (cloud, region, zone, instance type, spot or on-demand) with the columns of
`pricing.models.Offer` plus `accelerator_family`, `hazard_per_hour` and `interruption_band`.
Rows without a usable price are not offers: an empty or non-positive Price gives no on-demand
row, an empty SpotPrice gives no spot row.

Parsing the CSVs costs far more than ranking, so the normalized frame is also kept as a pickle
under the cache folder, keyed by the source files' size and mtime (reparsed when they change).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from pricing.atomic import atomic_write_bytes
from pricing.gcp_split import join_gcp
from pricing.gpus import GPU_MEMORY_GIB, gpu_family
from pricing.risk import RiskModel, load_risk_model
from pricing.sources import CatalogSource, resolve_sources
from pricing.table import OfferTable, UnpricedGpu
from pricing.vms_csv import read_vms_csv

# Bump when the normalized layout changes, so old parsed pickles are ignored.
PARSE_VERSION = "5"

OFFER_COLUMNS = (
    "cloud", "region", "zone", "instance_type", "accelerator", "accelerator_family",
    "accelerator_count", "vcpus", "memory_gib", "gpu_memory_gib", "spot",
    "price_usd_per_hour", "on_demand_price_usd_per_hour",
)  # fmt: skip


@dataclass(frozen=True)
class Catalog:
    offers: pd.DataFrame  # OFFER_COLUMNS + hazard_per_hour, interruption_band
    sources: dict[str, CatalogSource]
    risk_source: str = "snapshot"
    unpriced: tuple[UnpricedGpu, ...] = ()  # GPU rows that form no offer (e.g. no host VM row)

    @cached_property
    def table(self) -> OfferTable:
        """The offers as the numpy table that ranking reads."""
        return OfferTable.from_frame(self.offers, self.unpriced)

    @property
    def clouds(self) -> tuple[str, ...]:
        return tuple(sorted(self.sources))

    def regions(self, clouds: tuple[str, ...] | None = None) -> tuple[str, ...]:
        from pricing.frame import codes_and_categories, isin

        codes, cats = codes_and_categories(self.offers["region"])
        if clouds:
            codes = codes[isin(self.offers["cloud"], clouds)]
        return tuple(sorted(str(cats[i]) for i in np.unique(codes) if i >= 0))

    def accelerators(self) -> tuple[str, ...]:
        from pricing.frame import codes_and_categories

        codes, cats = codes_and_categories(self.offers["accelerator"])
        return tuple(sorted(str(cats[i]) for i in np.unique(codes) if i >= 0))


_PROCESS_CACHE: dict[tuple, Catalog] = {}


def load_catalog(
    catalog_dir: Path | str | None = None,
    *,
    cache_dir: Path | None = None,
    risk_file: Path | None = None,
    use_parsed_cache: bool = True,
) -> Catalog:
    """Load (once per process and set of source files) the catalog from the resolved sources.

    `cache_dir` holds refreshed catalogs and the parsed-frame cache (None: snapshot only, no
    parsed cache); `risk_file` is the user's risk overrides (None: none).
    """
    sources = resolve_sources(Path(catalog_dir) if catalog_dir is not None else None, cache_dir)
    signature = _signature(sources)
    risk_sig = (_stat_sig(risk_file) if risk_file is not None else ()) + (
        _stat_sig(cache_dir / "aws" / "spot_advisor.csv") if cache_dir is not None else ()
    )
    key = (signature, risk_sig, str(cache_dir))
    if key in _PROCESS_CACHE:
        return _PROCESS_CACHE[key]
    frame, unpriced = _load_offers(sources, signature, cache_dir if use_parsed_cache else None)
    risk: RiskModel = load_risk_model(cache_dir=cache_dir, risk_file=risk_file)
    catalog = Catalog(offers=risk.apply(frame), sources=sources, risk_source=risk.advisor_source, unpriced=unpriced)
    _PROCESS_CACHE[key] = catalog
    return catalog


def clear_process_cache() -> None:
    _PROCESS_CACHE.clear()


def normalize_cloud(cloud: str, raw: pd.DataFrame, spot_overlay: pd.DataFrame | None = None) -> pd.DataFrame:
    """Raw vms.csv rows of one cloud -> offer rows (on-demand and spot rows split)."""
    if cloud == "gcp":
        raw = join_gcp(raw)
    if spot_overlay is not None and len(spot_overlay):
        raw = apply_spot_overlay(raw, spot_overlay)
    raw = raw[raw["region"].notna() & raw["instance_type"].notna()]
    base = raw.drop(columns=["price", "spot_price"])
    price = raw["price"].where(raw["price"] > 0)
    spot_price = raw["spot_price"].where(raw["spot_price"] > 0)
    on_demand = base[price.notna()].assign(
        spot=False, price_usd_per_hour=price[price.notna()], on_demand_price_usd_per_hour=price[price.notna()]
    )
    has_spot = spot_price.notna()
    spot = base[has_spot].assign(
        spot=True, price_usd_per_hour=spot_price[has_spot], on_demand_price_usd_per_hour=price[has_spot]
    )
    df = pd.concat([on_demand, spot], ignore_index=True)
    df["cloud"] = cloud
    acc = df["accelerator"]
    df["accelerator_family"] = acc.map({a: gpu_family(a) for a in acc.dropna().unique()})
    # Fill GPU memory from the name when GpuInfo gave none (RunPod).
    known_mem = acc.map(GPU_MEMORY_GIB).astype("float64") * df["accelerator_count"]
    df["gpu_memory_gib"] = df["gpu_memory_gib"].fillna(known_mem)
    df = df.drop_duplicates(subset=["region", "zone", "instance_type", "spot", "accelerator", "accelerator_count"])
    return df.loc[:, list(OFFER_COLUMNS)]


def apply_spot_overlay(raw: pd.DataFrame, overlay: pd.DataFrame) -> pd.DataFrame:
    """Replace SpotPrice where live prices exist for (instance type, region, zone).

    The overlay's `zone` is matched against the catalog's zone column, which for AWS holds zone
    ids (use1-az1); the overlay carries both the id and the name, so either spelling matches.
    """
    raw = raw.copy()
    live: dict[tuple[str, str, str], float] = {}
    for row in overlay.itertuples(index=False):
        for z in {row.zone_id, row.zone}:
            if isinstance(z, str) and z:
                live[(row.instance_type, row.region, z)] = float(row.spot_price)
    keys = list(zip(raw["instance_type"], raw["region"], raw["zone"], strict=True))
    new = np.array([live.get(k, np.nan) for k in keys], dtype="float64")
    hit = ~np.isnan(new)
    raw.loc[hit, "spot_price"] = new[hit]
    return raw


def read_spot_overlay(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"region": str, "zone": str, "zone_id": str, "instance_type": str})


def _load_offers(
    sources: dict[str, CatalogSource], signature: tuple, cache_dir: Path | None
) -> tuple[pd.DataFrame, tuple[UnpricedGpu, ...]]:
    pickle_path = None
    if cache_dir is not None:
        ident = hashlib.sha1(json.dumps([[c, str(s.path)] for c, s in sorted(sources.items())]).encode()).hexdigest()
        pickle_path = cache_dir / ".parsed" / f"{ident[:16]}.pkl"
        cached = _read_parsed(pickle_path, signature)
        if cached is not None:
            return cached
    frames, unpriced = [], []
    for cloud, src in sorted(sources.items()):
        raw = read_vms_csv(src.path, label=f"{cloud} catalog {src.path}")
        overlay = read_spot_overlay(src.spot_overlay) if src.spot_overlay is not None else None
        offers = normalize_cloud(cloud, raw, overlay)
        if src.kind == "snapshot":  # GPU offers only; its N1 rows are there as GPU hosts
            offers = offers[offers["accelerator"].notna()]
        if cloud == "gcp":
            unpriced += unpaired_gcp_gpus(raw, offers)
        frames.append(offers)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(OFFER_COLUMNS))
    df = _compact(df)
    result = (df, tuple(unpriced))
    if pickle_path is not None:
        try:
            atomic_write_bytes(pickle_path, pickle.dumps((signature, result), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            pass  # a read-only home only costs speed
    return result


def unpaired_gcp_gpus(raw: pd.DataFrame, offers: pd.DataFrame) -> list[UnpricedGpu]:
    """GCP accelerator rows (priced, not TPUs) in zones where no offer could be formed for them."""
    from pricing.gcp_split import GCP_HOSTS, N1_DEFAULT_VCPUS

    acc = raw[raw["instance_type"].isna() & raw["accelerator"].notna() & raw["price"].notna()]
    acc = acc[~acc["accelerator"].str.startswith("tpu-")]
    offered = set(zip(offers["accelerator"], offers["accelerator_count"], offers["zone"], strict=True))
    out = []
    for (name, count), zones in acc.groupby(["accelerator", "accelerator_count"])["zone"]:
        missing = {z for z in zones if (name, count, z) not in offered}
        if not missing:
            continue
        if name in GCP_HOSTS:
            hosts = "/".join(GCP_HOSTS[name].get(int(count), ())) or f"(none for {int(count)} GPUs)"
            reason = f"no {hosts} host VM row in the same zone"
        elif name in N1_DEFAULT_VCPUS:
            reason = "no N1 host VM row (n1-standard/highmem/highcpu) that can carry them in the same zone"
        else:
            reason = "no known host VM family for this GPU"
        out.append(UnpricedGpu("gcp", str(name), int(count), len(missing), reason))
    return out


def _compact(df: pd.DataFrame) -> pd.DataFrame:
    """Categoricals for repeated strings: smaller pickles, faster filters."""
    df = df.reset_index(drop=True)
    for c in ("cloud", "region", "zone", "instance_type", "accelerator", "accelerator_family"):
        df[c] = df[c].astype("category")
    df["accelerator_count"] = df["accelerator_count"].astype("int32")
    df["spot"] = df["spot"].astype(bool)
    for c in ("vcpus", "memory_gib", "gpu_memory_gib", "price_usd_per_hour", "on_demand_price_usd_per_hour"):
        df[c] = df[c].astype("float64")
    return df


def _read_parsed(path: Path, signature: tuple) -> tuple[pd.DataFrame, tuple[UnpricedGpu, ...]] | None:
    try:
        with open(path, "rb") as f:
            sig, result = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        return None
    return result if sig == signature else None


def _stat_sig(path: Path | None) -> tuple:
    if path is None:
        return (None,)
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_size, st.st_mtime_ns)


def _signature(sources: dict[str, CatalogSource]) -> tuple:
    return (PARSE_VERSION,) + tuple(
        (c, *_stat_sig(s.path), *_stat_sig(s.spot_overlay)) for c, s in sorted(sources.items())
    )
