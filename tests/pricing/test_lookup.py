import pytest

from pricing.lookup import hourly_price
from tests.pricing.helpers import layout_slices


def test_hourly_price_from_real_slices(shared_data, tmp_path):
    d = layout_slices(shared_data, tmp_path / "cat")
    # a2-highgpu-8g on-demand in us-central1 = host 5.91582 + A100 x8 23.47126 (read from the slice)
    assert hourly_price("gcp", "us-central1", "a2-highgpu-8g", catalog_dir=d) == pytest.approx(5.91582 + 23.47126)
    # spot, zone given vs cheapest zone of the region (ap-northeast-2 g5.12xlarge: az1 1.8508, az4 3.7358)
    assert hourly_price("aws", "ap-northeast-2", "g5.12xlarge", spot=True, zone="apne2-az4", catalog_dir=d) == 3.7358
    assert hourly_price("aws", "ap-northeast-2", "g5.12xlarge", spot=True, catalog_dir=d) == 1.8508
    assert hourly_price("aws", "ap-northeast-2", "g5.12xlarge", catalog_dir=d) == 6.97442
    assert hourly_price("aws", "ap-northeast-2", "nope.xlarge", catalog_dir=d) is None
    assert hourly_price("lambda", "us-east-1", "gpu_8x_a100", spot=True, catalog_dir=d) is None  # no spot


def test_env_catalog_dir(shared_data, tmp_path, monkeypatch):
    d = layout_slices(shared_data, tmp_path / "cat", clouds=("lambda",))
    monkeypatch.setenv("LAUNCHER_CATALOG_DIR", str(d))
    assert hourly_price("lambda", "us-east-1", "gpu_8x_a100") == 10.32
