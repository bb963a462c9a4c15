"""The compiled offers table: same answers as the pandas catalog, rebuilt when its inputs change,
never trusted when torn or altered."""

import dataclasses
import os

import numpy as np
import pytest

from pricing.catalog import clear_process_cache, load_catalog
from pricing.compiled import clear_process_cache as clear_compiled, load_offer_catalog
from pricing.models import GpuRequest, OfferQuery
from pricing.rank import explain_offers
from pricing.table import OfferTable, TableFileError
from tests.pricing.helpers import AWS_V7_HEADER, layout_slices, write_csv

QUERIES = [
    OfferQuery(gpus=(GpuRequest("H100", 8),)),
    OfferQuery(gpus=(GpuRequest("A100", 8),), spot=False, work_hours=10),
    OfferQuery(gpus=(GpuRequest("L4", 1), GpuRequest("A10G", 1)), spot=True, checkpoint_minutes=30),
    OfferQuery(gpus=(GpuRequest("A100-80GB", 8),), regions=("us-central1",), clouds=("gcp",)),
    OfferQuery(min_gpu_memory_gib=500, max_price_usd_per_hour=60, exclude_regions=("us-east-1",)),
    OfferQuery(work_hours=50, deadline_hours=52),
    OfferQuery(),
]


@pytest.fixture
def slices(shared_data, tmp_path):
    return layout_slices(shared_data, tmp_path / "cat")


def _records(report):
    return [dataclasses.asdict(s) for s in report.offers], report.matched, report.dropped


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_same_answers_as_the_pandas_catalog(slices, tmp_path, query):
    cache, risk = tmp_path / "cache", tmp_path / "risk.yaml"
    pandas_cat = load_catalog(slices, cache_dir=cache, risk_file=risk)
    compiled = load_offer_catalog(slices, cache_dir=cache, risk_file=risk)
    # a second process would read the stored table: do that here too
    clear_compiled()
    stored = load_offer_catalog(slices, cache_dir=cache, risk_file=risk)
    assert stored is not compiled and len(stored.table) == len(pandas_cat.offers)
    want = _records(explain_offers(pandas_cat, query))
    assert want[0], "query matched nothing: not a useful comparison"
    assert _records(explain_offers(stored, query)) == want  # exactly equal, every field


def test_rebuilt_when_a_source_changes_and_torn_files_are_not_trusted(tmp_path):
    d, cache, risk = tmp_path / "dir", tmp_path / "cache", tmp_path / "risk.yaml"
    row = ["p5.48xlarge", "H100", "8", "192", "2048", "", "98.32", "", "us-east-1", "use1-az1"]
    f = write_csv(d / "aws" / "vms.csv", list(AWS_V7_HEADER), [row])

    def price():
        clear_compiled()
        clear_process_cache()
        cat = load_offer_catalog(d, cache_dir=cache, risk_file=risk)
        return cat.table.floats["price_usd_per_hour"].tolist()

    assert price() == [98.32]
    (stored,) = (cache / ".compiled").iterdir()
    assert oct(stored.stat().st_mode & 0o777) == "0o600"
    write_csv(f, list(AWS_V7_HEADER), [row[:6] + ["90.5"] + row[7:]])
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))  # a change of mtime at least
    assert price() == [90.5]
    # flip one byte of the stored prices: the content hash catches it and the table is rebuilt
    data = bytearray(stored.read_bytes())
    data[-1] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(TableFileError, match="content hash"):
        OfferTable.from_bytes(bytes(data), _signature_of(stored))
    assert price() == [90.5]
    assert stored.read_bytes() != bytes(data)  # rewritten whole
    stored.write_bytes(b"LAUNCHER-OFFERS\n\x05")  # torn
    assert price() == [90.5]


def _signature_of(path):
    import json

    raw = path.read_bytes()
    n = int.from_bytes(raw[16:24], "little")
    return json.loads(raw[24 : 24 + n])["signature"]


def test_table_round_trip_keeps_missing_values_and_order():
    import pandas as pd

    df = pd.DataFrame(
        {
            "cloud": ["gcp", "aws", "aws"],
            "region": ["b", "a", None],
            "zone": [None, "z2", "z1"],
            "instance_type": ["x", "y", "x"],
            "accelerator": ["T4", None, "H100"],
            "accelerator_family": ["T4", None, "H100"],
            "interruption_band": ["default", "on-demand", "<5%"],
            "accelerator_count": [1, 0, 8],
            "vcpus": [4.0, np.nan, 192.0],
            "memory_gib": [26.0, 1.0, 2048.0],
            "gpu_memory_gib": [16.0, np.nan, 640.0],
            "price_usd_per_hour": [0.1, 0.2, 98.32],
            "on_demand_price_usd_per_hour": [0.5, 0.2, 98.32],
            "hazard_per_hour": [0.0044, 0.0, 0.0],
            "spot": [True, False, False],
        }
    )
    t = OfferTable.from_frame(df)
    back = OfferTable.from_bytes(t.to_bytes("sig"), "sig")
    assert back.names["cloud"] == ("aws", "gcp") and back.codes["cloud"].tolist() == [1, 0, 0]
    assert back.text("region", np.arange(3)) == ["b", "a", None]
    assert back.text("zone", np.arange(3)) == [None, "z2", "z1"]
    assert np.isnan(back.floats["vcpus"][1]) and back.floats["price_usd_per_hour"].tolist() == [0.1, 0.2, 98.32]
    assert back.spot.tolist() == [True, False, False] and back.accelerator_count.tolist() == [1, 0, 8]
    assert back.present("cloud", np.array([False, True, True])) == ("aws",)
    with pytest.raises(TableFileError, match="other sources"):
        OfferTable.from_bytes(t.to_bytes("sig"), "another")


@pytest.mark.parametrize("limit", [1, 3, 20, 500])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_top_n_is_the_prefix_of_the_full_order(slices, tmp_path, query, limit):
    # the slices hold many exact ties (same price in several zones): the cut must keep them in order
    cat = load_offer_catalog(slices, cache_dir=tmp_path / "cache", risk_file=tmp_path / "risk.yaml")
    full = explain_offers(cat, query).offers
    top = explain_offers(cat, query, limit=limit).offers
    assert [dataclasses.asdict(s) for s in top] == [dataclasses.asdict(s) for s in full[:limit]]
