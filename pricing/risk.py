"""Interruption hazard per offer (events per hour, a Poisson rate). On-demand: 0.

AWS: the Spot Instance Advisor feed gives, per region and instance type, a band of the share of
instances interrupted per month (<5%, 5-10%, 10-15%, 15-20%, >20%). A band becomes a rate as
follows: take the band's midpoint p as the probability that an instance running for a whole
month (730 h) is interrupted at least once; with a constant hazard λ, P(no interruption in
730 h) = exp(-730 λ), so λ = -ln(1 - p) / 730. The open-ended '>20%' band uses p = 0.30.
AWS offers missing from the feed use `CLOUD_DEFAULTS['aws']`.

Other clouds publish no per-type figures. Defaults (documented guesses, override them):
GCP states that it preempts on average 5-15% of spot/preemptible VMs per day; we use the
midpoint 10%/day, λ = -ln(0.9)/24 ≈ 0.0044/h, for GCP, Azure and RunPod (interruptible pods).
Lambda sells no spot capacity (its catalog has no SpotPrice), its default only matters if a
user catalog adds one.

Users override any of this in `$LAUNCHER_HOME/risk.yaml` (see `RiskFile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pricing.hazard import HOURS_PER_MONTH, RiskOverride, monthly_fraction_to_hourly_hazard  # noqa: F401

# (label, representative monthly interruption fraction) in the feed's band order.
ADVISOR_BANDS: tuple[tuple[str, float], ...] = (
    ("<5%", 0.025),
    ("5-10%", 0.075),
    ("10-15%", 0.125),
    ("15-20%", 0.175),
    (">20%", 0.30),
)
ADVISOR_FEED_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
# Instance families with accelerators: the derived advisor table keeps only these.
GPU_FAMILY_PREFIXES = ("p2.", "p3", "p4", "p5", "p6", "g3", "g4", "g5", "g6", "g7", "gr6", "trn", "inf", "dl1", "dl2")


BAND_HAZARD_PER_HOUR: tuple[float, ...] = tuple(monthly_fraction_to_hourly_hazard(p) for _, p in ADVISOR_BANDS)
_PER_DAY_10PCT = -math.log(0.9) / 24.0
CLOUD_DEFAULTS: dict[str, float] = {
    "aws": BAND_HAZARD_PER_HOUR[1],  # not in the feed: AWS's global average band is '<10%'
    "gcp": _PER_DAY_10PCT,
    "azure": _PER_DAY_10PCT,
    "runpod": _PER_DAY_10PCT,
    "lambda": _PER_DAY_10PCT,
}
FALLBACK_DEFAULT = _PER_DAY_10PCT  # any other cloud

SNAPSHOT_ADVISOR = Path(__file__).parent / "snapshot" / "aws_spot_advisor.csv"


def derive_advisor_table(feed: dict, *, gpu_only: bool = True, os_name: str = "Linux") -> pd.DataFrame:
    """The feed (spot-advisor-data.json) as rows (region, instance_type, band)."""
    rows = []
    for region, by_os in feed.get("spot_advisor", {}).items():
        for itype, rec in by_os.get(os_name, {}).items():
            if gpu_only and not itype.startswith(GPU_FAMILY_PREFIXES):
                continue
            band = int(rec["r"])
            if 0 <= band < len(ADVISOR_BANDS):
                rows.append((region, itype, band))
    rows.sort()
    return pd.DataFrame(rows, columns=["region", "instance_type", "band"])


def read_advisor_table(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"region": str, "instance_type": str, "band": "int64"})
    return df[["region", "instance_type", "band"]]


@dataclass(frozen=True)
class RiskModel:
    """Everything needed to assign a hazard to each offer."""

    advisor: pd.DataFrame  # region, instance_type, band
    cloud_defaults: dict[str, float] = field(default_factory=lambda: dict(CLOUD_DEFAULTS))
    overrides: tuple[RiskOverride, ...] = ()
    advisor_source: str = "snapshot"

    def apply(self, offers: pd.DataFrame) -> pd.DataFrame:
        """Add hazard_per_hour and interruption_band columns (vectorized on category codes)."""
        from pricing.frame import eq

        n = len(offers)
        hazard = np.zeros(n, dtype="float64")
        band = np.zeros(n, dtype="int16")  # index into labels below
        labels = ["on-demand", "default", "user", *(label for label, _ in ADVISOR_BANDS)]
        spot = offers["spot"].to_numpy(dtype=bool)
        from pricing.frame import codes_and_categories

        cloud_codes, cloud_cats = codes_and_categories(offers["cloud"])
        clouds = {str(cloud_cats[i]) for i in np.unique(cloud_codes[spot]) if i >= 0}
        for cloud in sorted(clouds):
            sel = spot & eq(offers["cloud"], cloud)
            hazard[sel] = self.cloud_defaults.get(cloud, FALLBACK_DEFAULT)
            band[sel] = 1
        aws = spot & eq(offers["cloud"], "aws") if "aws" in clouds else np.zeros(n, dtype=bool)
        if aws.any() and len(self.advisor):
            r_codes0 = codes_and_categories(offers["region"])[0]
            t_codes0 = codes_and_categories(offers["instance_type"])[0]
            where = np.flatnonzero(aws & (r_codes0 >= 0) & (t_codes0 >= 0))
            table = {(r, t): b for r, t, b in self.advisor[["region", "instance_type", "band"]].itertuples(index=False)}
            r_codes, r_cats = codes_and_categories(offers["region"])
            t_codes, t_cats = codes_and_categories(offers["instance_type"])
            # Look each distinct (region, type) pair up once, then scatter back.
            key = r_codes[where].astype("int64") * (len(t_cats) + 1) + t_codes[where]
            uniq, inverse = np.unique(key, return_inverse=True)
            per_pair = np.array(
                [table.get((r_cats[k // (len(t_cats) + 1)], t_cats[k % (len(t_cats) + 1)]), -1) for k in uniq],
                dtype="int64",
            )
            bands = per_pair[inverse]
            found = bands >= 0
            hazard[where[found]] = np.asarray(BAND_HAZARD_PER_HOUR)[bands[found]]
            band[where[found]] = 3 + bands[found]
        for o in self.overrides:
            sel = spot & eq(offers["cloud"], o.cloud)
            if o.region is not None:
                sel &= eq(offers["region"], o.region)
            if o.instance_type is not None:
                sel &= eq(offers["instance_type"], o.instance_type)
            hazard[sel] = o.hazard_per_hour
            band[sel] = 2
        out = offers.copy()
        out["hazard_per_hour"] = hazard
        out["interruption_band"] = pd.Categorical.from_codes(band, categories=labels)
        return out


def load_risk_model(*, cache_dir: Path | None = None, risk_file: Path | None = None) -> RiskModel:
    """Advisor table from the refreshed cache if present, else the shipped one; plus the user file."""
    advisor_path, source = SNAPSHOT_ADVISOR, "snapshot"
    if cache_dir is not None and (cache_dir / "aws" / "spot_advisor.csv").is_file():
        advisor_path, source = cache_dir / "aws" / "spot_advisor.csv", "cache"
    advisor = (
        read_advisor_table(advisor_path)
        if advisor_path.is_file()
        else pd.DataFrame({"region": [], "instance_type": [], "band": []})
    )
    defaults = dict(CLOUD_DEFAULTS)
    overrides: tuple[RiskOverride, ...] = ()
    if risk_file is not None and risk_file.is_file():
        from pricing.risk_file import read_risk_file

        user = read_risk_file(risk_file)
        defaults.update(user.cloud_defaults)
        overrides = user.overrides
    return RiskModel(advisor=advisor, cloud_defaults=defaults, overrides=overrides, advisor_source=source)
