"""Typed values shared by the pricing module and its callers (frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuRequest:
    """One acceptable GPU shape: `name` normalized (e.g. 'A100-80GB'), `count` >= 1."""

    name: str
    count: int


@dataclass(frozen=True)
class Offer:
    """One purchasable placement: a cloud/region/zone/instance type, spot or on-demand."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    accelerator: str | None
    accelerator_count: int
    vcpus: float | None
    memory_gib: float | None
    gpu_memory_gib: float | None  # total across the instance's GPUs, when known
    spot: bool
    price_usd_per_hour: float
    on_demand_price_usd_per_hour: float | None = None


@dataclass(frozen=True)
class OfferQuery:
    """What the caller wants ranked. None means 'no constraint'."""

    gpus: tuple[GpuRequest, ...] | None = None  # any of these shapes; None = any (incl. CPU-only)
    spot: bool | None = None  # True = spot only, False = on-demand only, None = both
    clouds: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None
    exclude_regions: tuple[str, ...] = ()
    zones: tuple[str, ...] | None = None
    instance_types: tuple[str, ...] | None = None
    min_gpu_memory_gib: float | None = None
    min_vcpus: float | None = None
    min_memory_gib: float | None = None
    max_price_usd_per_hour: float | None = None
    work_hours: float = 1.0
    checkpoint_minutes: float | None = None  # None = Young/Daly optimum per offer
    checkpoint_cost_minutes: float = 1.0
    restart_overhead_minutes: float = 5.0
    deadline_hours: float | None = None


@dataclass(frozen=True)
class ScoredOffer:
    """An offer with its expected cost to finish and the parts of that score."""

    offer: Offer
    rank: int
    hazard_per_hour: float
    interruption_band: str  # e.g. '<5%', '5-10%', 'on-demand', 'default'
    checkpoint_minutes: float | None
    expected_hours: float
    expected_cost_usd: float
    parts: dict[str, float] = field(default_factory=dict)  # e.g. work, lost_work, restarts, checkpoints
