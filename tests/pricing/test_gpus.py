import pytest

from pricing.errors import PricingInputError as BadInputError
from pricing.errors import UnknownNameError
from pricing.gpus import gpu_family, normalize_gpu_name, parse_gpus
from pricing.models import GpuRequest


@pytest.mark.parametrize(
    ("raw", "canon"),
    [
        ("a100", "A100"),
        ("A100", "A100"),
        ("a100-80gb", "A100-80GB"),
        ("A100_80GB", "A100-80GB"),
        ("h100", "H100"),
        ("l4", "L4"),
        ("a10g", "A10G"),
        ("t4", "T4"),
        ("v100", "V100"),
        ("h100-sxm", "H100-SXM"),
        ("H100SXM", "H100-SXM"),
        ("h100-mega", "H100-MEGA"),
        ("a100-40gb", "A100"),
        ("rtx 4090", "RTX4090"),
    ],
)
def test_normalize(raw, canon):
    assert normalize_gpu_name(raw) == canon


def test_normalize_unknown_and_catalog_names():
    assert normalize_gpu_name("Z9000") is None
    assert normalize_gpu_name("z9000", known=["Z9000"]) == "Z9000"


def test_families():
    assert gpu_family("H100-MEGA") == "H100"
    assert gpu_family("H100-SXM") == "H100"
    assert gpu_family("A100-80GB-SXM") == "A100-80GB"
    assert gpu_family("H100-NVL") == "H100-NVL"
    assert gpu_family("A100") == "A100"


def test_parse_shapes():
    assert parse_gpus("H100:8") == (GpuRequest("H100", 8),)
    assert parse_gpus("h100") == (GpuRequest("H100", 1),)
    assert parse_gpus("A100|H100:8") == (GpuRequest("A100", 8), GpuRequest("H100", 8))
    assert parse_gpus("A100:4|H100:8") == (GpuRequest("A100", 4), GpuRequest("H100", 8))
    assert parse_gpus("A100:8,l4:1") == (GpuRequest("A100", 8), GpuRequest("L4", 1))
    assert parse_gpus(["A100:8", "H100:8", "a100:8"]) == (GpuRequest("A100", 8), GpuRequest("H100", 8))


@pytest.mark.parametrize("spec", ["H100:0", "H100:-1", "H100:-8"])
def test_count_must_be_positive(spec):
    with pytest.raises(BadInputError, match="at least 1"):
        parse_gpus(spec)


@pytest.mark.parametrize("spec", ["H100:", "H100:x", "H100::8", ":8", "", "A100||H100:8", "H100:8:1", "H100:1.5"])
def test_malformed(spec):
    with pytest.raises(BadInputError) as ei:
        parse_gpus(spec)
    assert not isinstance(ei.value, UnknownNameError)


def test_unknown_gpu_did_you_mean():
    with pytest.raises(UnknownNameError) as ei:
        parse_gpus("H1000:8")
    assert ei.value.kind == "GPU"
    assert "H100" in (ei.value.hint or "")
