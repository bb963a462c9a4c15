"""Hazard model: band -> rate conversion, the shipped advisor table, defaults and user overrides."""

import json
import math

import pandas as pd
import pytest

from pricing.errors import PricingInputError as SpecError
from pricing import risk
from pricing.risk import (
    ADVISOR_BANDS,
    CLOUD_DEFAULTS,
    RiskModel,
    derive_advisor_table,
    load_risk_model,
    monthly_fraction_to_hourly_hazard,
)


def test_band_to_rate_survival_matches_band():
    for _, p in ADVISOR_BANDS:
        lam = monthly_fraction_to_hourly_hazard(p)
        # an instance running a whole month (730 h) survives with probability 1 - p
        assert math.exp(-730 * lam) == pytest.approx(1 - p)
    assert monthly_fraction_to_hourly_hazard(0.075) == pytest.approx(-math.log(0.925) / 730)
    assert [p for _, p in ADVISOR_BANDS] == [0.025, 0.075, 0.125, 0.175, 0.30]


def test_derive_advisor_table_keeps_gpu_linux_rows():
    feed = {
        "ranges": [],
        "spot_advisor": {
            "us-east-1": {
                "Linux": {
                    "p5.48xlarge": {"r": 4, "s": 40},
                    "m5.large": {"r": 0, "s": 70},
                    "g5.xlarge": {"r": 1, "s": 60},
                },
                "Windows": {"p3.2xlarge": {"r": 2, "s": 1}},
            },
        },
    }
    t = derive_advisor_table(feed)
    assert t.to_dict("records") == [
        {"region": "us-east-1", "instance_type": "g5.xlarge", "band": 1},
        {"region": "us-east-1", "instance_type": "p5.48xlarge", "band": 4},
    ]


def test_shipped_advisor_table_matches_feed(shared_data):
    feed = json.loads((shared_data / "spot-advisor-data.json").read_text())
    shipped = pd.read_csv(risk.SNAPSHOT_ADVISOR)
    assert len(shipped) > 100
    for rec in shipped.sample(50, random_state=1).to_dict("records"):
        assert feed["spot_advisor"][rec["region"]]["Linux"][rec["instance_type"]]["r"] == rec["band"]
    # every GPU type of the feed for a region is in the table
    want = {k for k in feed["spot_advisor"]["us-east-1"]["Linux"] if k.startswith(("p4d", "p5", "g5", "g6"))}
    have = set(shipped[shipped["region"] == "us-east-1"]["instance_type"])
    assert want <= have


def _offers(rows):
    return pd.DataFrame(rows, columns=["cloud", "region", "instance_type", "spot"])


def test_apply_assigns_band_default_and_zero():
    advisor = pd.DataFrame({"region": ["us-east-1"], "instance_type": ["p5.48xlarge"], "band": [3]})
    model = RiskModel(advisor=advisor)
    out = model.apply(
        _offers(
            [
                ("aws", "us-east-1", "p5.48xlarge", True),
                ("aws", "us-east-1", "p5.48xlarge", False),
                ("aws", "us-west-2", "p5.48xlarge", True),  # not in the feed
                ("gcp", "us-central1", "a3-highgpu-8g", True),
                ("runpod", "US", "8x_H100_SECURE", True),
            ]
        )
    )
    assert list(out["interruption_band"].astype(str)) == ["15-20%", "on-demand", "default", "default", "default"]
    h = list(out["hazard_per_hour"])
    assert h[0] == pytest.approx(-math.log(1 - 0.175) / 730)
    assert h[1] == 0.0
    assert h[2] == pytest.approx(CLOUD_DEFAULTS["aws"])
    assert h[3] == pytest.approx(-math.log(0.9) / 24)
    assert h[4] == pytest.approx(CLOUD_DEFAULTS["runpod"])


def test_user_risk_file_overrides(tmp_path):
    f = tmp_path / "risk.yaml"
    f.write_text(
        "defaults:\n  gcp: {hazard_per_hour: 0.5}\n  runpod: {monthly_interruption_fraction: 0.5}\n"
        "overrides:\n"
        "  - {cloud: aws, region: us-east-1, instance_type: p5.48xlarge, hazard_per_hour: 0.25}\n"
        "  - {cloud: aws, hazard_per_hour: 0.125}\n"
    )
    model = load_risk_model(cache_dir=tmp_path / "nocache", risk_file=f)
    out = model.apply(
        _offers(
            [
                ("aws", "us-east-1", "p5.48xlarge", True),
                ("aws", "eu-west-1", "g5.xlarge", True),
                ("gcp", "us-central1", "a2-highgpu-8g", True),
                ("runpod", "US", "x", True),
                ("gcp", "us-central1", "a2-highgpu-8g", False),
            ]
        )
    )
    # the specific override wins although it is listed first
    assert list(out["hazard_per_hour"]) == pytest.approx([0.25, 0.125, 0.5, -math.log(0.5) / 730, 0.0])
    assert list(out["interruption_band"].astype(str))[:2] == ["user", "user"]


@pytest.mark.parametrize(
    "text",
    [
        "defaults:\n  gcp: {hazard_per_hour: -1}\n",
        "defaults:\n  gcp: {hazard_per_hour: 0.1, monthly_interruption_fraction: 0.1}\n",
        "defaults:\n  gcp: {}\n",
        "overrides:\n  - {cloud: aws, hazard_per_hour: 0.1, typo: 1}\n",
        "colour: blue\n",
        "defaults: [unclosed\n",
    ],
)
def test_bad_risk_file_is_spec_error(tmp_path, text):
    f = tmp_path / "risk.yaml"
    f.write_text(text)
    with pytest.raises(SpecError, match="invalid risk file"):
        load_risk_model(cache_dir=tmp_path, risk_file=f)
