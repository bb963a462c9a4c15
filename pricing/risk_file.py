"""The user's risk overrides, `$LAUNCHER_HOME/risk.yaml`, validated with pydantic.

defaults:                       # per cloud; give a rate or a monthly fraction
  gcp: {hazard_per_hour: 0.01}
  azure: {monthly_interruption_fraction: 0.10}
overrides:                      # most specific wins (later entries win over earlier ones)
  - {cloud: aws, region: us-east-1, instance_type: p5.48xlarge, hazard_per_hour: 0.05}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pricing.errors import PricingInputError
from pricing.hazard import RiskOverride, monthly_fraction_to_hourly_hazard


class _Rate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hazard_per_hour: float | None = Field(default=None, ge=0)
    monthly_interruption_fraction: float | None = Field(default=None, ge=0, lt=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> _Rate:
        if (self.hazard_per_hour is None) == (self.monthly_interruption_fraction is None):
            raise ValueError("give exactly one of hazard_per_hour, monthly_interruption_fraction")
        return self

    def rate(self) -> float:
        if self.hazard_per_hour is not None:
            return self.hazard_per_hour
        return monthly_fraction_to_hourly_hazard(self.monthly_interruption_fraction or 0.0)


class _Override(_Rate):
    cloud: str
    region: str | None = None
    instance_type: str | None = None


class _RiskFileModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: dict[str, _Rate] = Field(default_factory=dict)
    overrides: list[_Override] = Field(default_factory=list)


@dataclass(frozen=True)
class UserRisk:
    cloud_defaults: dict[str, float]
    overrides: tuple[RiskOverride, ...]


def read_risk_file(path: Path) -> UserRisk:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
        model = _RiskFileModel.model_validate(data)
    except (yaml.YAMLError, ValidationError) as e:
        raise PricingInputError(f"{path}: invalid risk file: {_first_line(e)}") from e
    # Less specific first so that region+type overrides are applied last and win.
    ordered = sorted(
        enumerate(model.overrides), key=lambda t: ((t[1].region is not None) + (t[1].instance_type is not None), t[0])
    )
    return UserRisk(
        cloud_defaults={c: r.rate() for c, r in model.defaults.items()},
        overrides=tuple(
            RiskOverride(cloud=o.cloud, hazard_per_hour=o.rate(), region=o.region, instance_type=o.instance_type)
            for _, o in ordered
        ),
    )


def _first_line(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        return f"{loc}: {err['msg']}" if loc else err["msg"]
    return str(e).splitlines()[0]
