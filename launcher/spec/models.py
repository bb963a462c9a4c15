"""The task spec: SkyPilot's task YAML as users write it, plus our `launcher:` block.

pydantic v2 with extra="forbid" everywhere, so a typo is an error with a "did you mean".
Fields SkyPilot accepts that we do not use on the local backend (ports, labels, disk_tier ...)
are still validated and kept, so the same file can be handed to SkyPilot.
"""

from __future__ import annotations

import re

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from launcher.errors import did_you_mean
from launcher.spec.durations import parse_duration_seconds
from pricing.clouds import SPEC_CLOUDS, canonical_cloud  # clouds a spec may name (`infra: aws/us-east-1`, `cloud: gcp`)

_Model = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def normalize_cloud(name: str) -> str:
    key = canonical_cloud(name)
    if key not in SPEC_CLOUDS:
        hint = did_you_mean(name, SPEC_CLOUDS)
        raise ValueError(f"unknown cloud {name!r}" + (f"; {hint}" if hint else f" (known: {', '.join(SPEC_CLOUDS)})"))
    return key


def parse_accelerators(value: Any) -> tuple[tuple[str, int], ...] | None:
    """'A100:8' | 'A100' | {A100: 8, H100: 8} | ['A100:8', 'H100:8'] -> ((name, count), ...).

    Several shapes mean "any of these". Parsed by `pricing.gpus.parse_gpus` (the one GPU-shape
    parser); its errors become ValueErrors (pydantic reports them with the spec's line).
    """
    from pricing.errors import PricingInputError
    from pricing.gpus import parse_gpus

    if value is None:
        return None
    if isinstance(value, str):
        shapes = [value]
    elif isinstance(value, dict):
        shapes = [f"{k}:{1 if v is None else v}" for k, v in value.items()]
    elif isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        shapes = [f"{n}:{c}" for n, c in value]  # already parsed (re-validation of a merged alternative)
    elif isinstance(value, list | set | tuple):
        for v in value:
            if not isinstance(v, str):
                raise ValueError(f"accelerator list items are strings like 'A100:8' (got {v!r})")
        shapes = list(value)
    else:
        raise ValueError(f"accelerators: write 'A100:8', {{A100: 8}} or a list of shapes (got {value!r})")
    if not shapes:
        raise ValueError("accelerators is empty")
    try:
        requests = parse_gpus(shapes)
    except PricingInputError as e:
        raise ValueError(str(e)) from None
    return tuple((r.name, r.count) for r in requests)


def _parse_amount(value: Any, what: str) -> float | None:
    """cpus/memory: 4, '4', '4+' (SkyPilot: '+' = at least). We treat every value as a minimum."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number like 4 or '4+'")
    if isinstance(value, int | float):
        amount = float(value)
    elif isinstance(value, str) and value.strip().rstrip("+").replace(".", "", 1).isdigit():
        amount = float(value.strip().rstrip("+"))
    else:
        raise ValueError(f"{what} must be a number like 4 or '4+' (got {value!r})")
    if amount <= 0:
        raise ValueError(f"{what} must be positive (got {value!r})")
    return amount


class Placement(BaseModel):
    """Where: parsed from `infra` ('aws', 'aws/us-east-1', 'aws/us-east-1/us-east-1a', 'local')
    or from cloud/region/zone."""

    model_config = _Model
    cloud: str | None = None  # None = any enabled cloud
    region: str | None = None
    zone: str | None = None

    @property
    def is_local(self) -> bool:
        return self.cloud == "local"


class ResourceFields(BaseModel):
    """One set of resources (the base block, or one `any_of` / `ordered` entry)."""

    model_config = _Model

    infra: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    accelerators: Any = None
    accelerator_args: dict[str, Any] | None = None
    instance_type: str | None = None
    cpus: int | float | str | None = None
    memory: int | float | str | None = None
    use_spot: bool | None = None
    job_recovery: str | dict[str, Any] | None = None
    disk_size: int | None = Field(default=None, ge=1)
    disk_tier: str | None = None
    network_tier: str | None = None
    ports: int | str | list[int | str] | None = None
    labels: dict[str, str] | None = None
    image_id: str | dict[str, str] | None = None
    max_hourly_cost: float | None = Field(default=None, gt=0)
    volumes: list[Any] | None = None
    priority: int | None = None

    @field_validator("accelerators")
    @classmethod
    def _accelerators(cls, v: Any) -> Any:
        return parse_accelerators(v)

    @field_validator("image_id")
    @classmethod
    def _image_id(cls, v: Any) -> Any:
        if v is None:
            return None
        images = v.values() if isinstance(v, dict) else [v]
        if isinstance(v, dict) and not v:
            raise ValueError("image_id: a per-region mapping needs at least one REGION: IMAGE entry")
        for image in images:
            check_image_ref(image)
        return v

    @field_validator("cloud")
    @classmethod
    def _cloud(cls, v: str | None) -> str | None:
        return normalize_cloud(v) if v is not None else None

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, v: Any) -> Any:
        _parse_amount(v, "cpus")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        _parse_amount(v, "memory")
        return v

    @field_validator("infra")
    @classmethod
    def _infra(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = v.strip().split("/")
        if len(parts) > 3 or not parts[0] or any(not p for p in parts):
            raise ValueError(f"infra is CLOUD[/REGION[/ZONE]], e.g. 'aws/us-east-1' or 'local' (got {v!r})")
        if parts[0] != "*":
            normalize_cloud(parts[0])
        if parts[0].lower() == "local" and len(parts) > 1:
            raise ValueError("infra 'local' takes no region or zone")
        return v.strip()

    @model_validator(mode="after")
    def _infra_xor_cloud(self) -> ResourceFields:
        if self.infra is not None and any(x is not None for x in (self.cloud, self.region, self.zone)):
            raise ValueError("use either `infra` or `cloud`/`region`/`zone`, not both")
        return self

    # ---- derived ------------------------------------------------------------------------------
    def placement(self) -> Placement:
        if self.infra is not None:
            parts = self.infra.split("/")
            cloud = None if parts[0] == "*" else normalize_cloud(parts[0])
            return Placement(
                cloud=cloud,
                region=parts[1] if len(parts) > 1 else None,
                zone=parts[2] if len(parts) > 2 else None,
            )
        return Placement(cloud=self.cloud, region=self.region, zone=self.zone)

    @property
    def min_vcpus(self) -> float | None:
        return _parse_amount(self.cpus, "cpus")

    @property
    def min_memory_gib(self) -> float | None:
        return _parse_amount(self.memory, "memory")

    @property
    def image(self) -> str | None:
        if isinstance(self.image_id, dict):  # per-region images: any one names the image
            return next(iter(self.image_id.values()), None)
        return self.image_id

    def image_for(self, region: str | None) -> str | None:
        """The image for an attempt in `region`: SkyPilot's per-region mapping picks that
        region's entry; a region it does not name (e.g. `local`) gets the first entry."""
        if isinstance(self.image_id, dict):
            if region is not None and region in self.image_id:
                return self.image_id[region]
            return self.image
        return self.image_id


# A container image reference (docker's grammar, loosely): [host[:port]/]path[:tag][@digest],
# optionally with SkyPilot's `docker:` prefix.
_IMAGE_REF = re.compile(
    r"^(docker:)?"
    r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?$"
)


def check_image_ref(image: Any) -> None:
    """Refuse an image no runtime could pull or start (e.g. `docker:` with nothing after it,
    upper-case repository names) before anything is written."""
    if not isinstance(image, str) or not image.strip():
        raise ValueError(f"image_id must be an image reference such as 'docker:ubuntu:22.04' (got {image!r})")
    if not _IMAGE_REF.match(image):
        raise ValueError(f"image_id {image!r} is not a valid image reference (e.g. 'docker:nvcr.io/nvidia/pytorch:24.08-py3')")


class ResourcesSpec(ResourceFields):
    """The `resources:` block: base fields plus `any_of` (cheapest wins) or `ordered`
    (preference order honored)."""

    any_of: list[ResourceFields] | None = None
    ordered: list[ResourceFields] | None = None

    @model_validator(mode="after")
    def _one_list(self) -> ResourcesSpec:
        if self.any_of is not None and self.ordered is not None:
            raise ValueError("use either `any_of` or `ordered`, not both")
        for lst in (self.any_of, self.ordered):
            if lst is not None and not lst:
                raise ValueError("`any_of` / `ordered` needs at least one entry")
        return self

    def alternatives(self) -> list[ResourceFields]:
        """Each alternative is the base block overridden by one entry (entries override base
        fields; an entry naming `infra` replaces the base's cloud/region/zone too)."""
        base = self.model_dump(exclude={"any_of", "ordered"}, exclude_unset=True)
        entries = self.any_of or self.ordered
        if not entries:
            return [ResourceFields(**base)]
        out = []
        for e in entries:
            override = e.model_dump(exclude_unset=True)
            merged = dict(base)
            if "infra" in override:
                for k in ("cloud", "region", "zone"):
                    merged.pop(k, None)
            if any(k in override for k in ("cloud", "region", "zone")):
                merged.pop("infra", None)
            merged.update(override)
            out.append(ResourceFields(**merged))
        return out

    @property
    def is_ordered(self) -> bool:
        return self.ordered is not None


class CheckpointSpec(BaseModel):
    model_config = _Model
    dir: str | None = None  # default: $LAUNCHER_HOME/runs/<run-id>/checkpoints (local)
    interval: str | None = None  # duration, e.g. '10m'
    cost: str | None = None  # time one save takes, e.g. '20s' (ranking; default 1 minute)

    @field_validator("interval", "cost", mode="before")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration_seconds(v)
        return v

    @property
    def interval_minutes(self) -> float | None:
        return parse_duration_seconds(self.interval) / 60.0 if self.interval else None

    @property
    def cost_minutes(self) -> float | None:
        return parse_duration_seconds(self.cost) / 60.0 if self.cost else None


DEFAULT_MAX_WAIT_S = 3600.0  # a run waits at most an hour in total for capacity unless told otherwise


class LauncherBlock(BaseModel):
    """Our extensions (SkyPilot ignores none of these: strip the block before handing it over)."""

    model_config = _Model
    project: str = "default"
    experiment: str | None = None
    owner: str | None = None
    cost_center: str | None = None
    budget_usd: float | None = Field(default=None, gt=0)
    deadline: str | None = None  # duration from launch, e.g. '6h'
    # Longest the controller waits in total for capacity (e.g. spot) before it gives up; default:
    # until the deadline, else DEFAULT_MAX_WAIT.
    max_wait: str | None = None
    expected_hours: float | None = Field(default=None, gt=0)
    checkpoint: CheckpointSpec | None = None
    max_price_usd_per_hour: float | None = Field(default=None, gt=0)
    max_restarts: int = Field(default=3, ge=0)
    recovery: str | None = None  # recovery policy name (launcher.policies.recovery)
    seeds: dict[str, int] | None = None
    data: list[str] | None = None  # paths hashed into the run's provenance
    tags: dict[str, str] | None = None
    # Experiment tracker of the run: 'mlflow' (MLFLOW_TRACKING_URI, else $LAUNCHER_HOME/mlflow.db);
    # unset: MLflow when MLFLOW_TRACKING_URI is set; 'off': never.
    tracking: Literal["mlflow", "off"] | None = None

    @field_validator("tracking", mode="before")
    @classmethod
    def _tracking(cls, v: object) -> object:
        return "off" if v is False else v  # YAML reads a bare `off` as false

    @field_validator("deadline", "max_wait", mode="before")
    @classmethod
    def _deadline(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration_seconds(v)
        return v

    @property
    def deadline_hours(self) -> float | None:
        return parse_duration_seconds(self.deadline) / 3600.0 if self.deadline else None

    @property
    def max_wait_seconds(self) -> float:
        """`max_wait`, else the time to the deadline, else DEFAULT_MAX_WAIT (1 h)."""
        if self.max_wait:
            return parse_duration_seconds(self.max_wait)
        if self.deadline:
            return parse_duration_seconds(self.deadline)
        return DEFAULT_MAX_WAIT_S


EnvValue = str | int | float | bool | None


class TaskSpec(BaseModel):
    model_config = _Model

    name: str | None = None
    workdir: str | None = None
    num_nodes: int = Field(default=1, ge=1)
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    envs: dict[str, EnvValue] = Field(default_factory=dict)
    secrets: dict[str, EnvValue] = Field(default_factory=dict)
    file_mounts: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    setup: str | None = None
    run: str | None = None
    config: dict[str, Any] | None = None  # SkyPilot per-task config overrides (kept, unused here)
    event_callback: str | None = None
    launcher: LauncherBlock = Field(default_factory=LauncherBlock)

    @field_validator("envs", "secrets")
    @classmethod
    def _env_names(cls, v: dict[str, EnvValue]) -> dict[str, EnvValue]:
        for k in v:
            if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
                raise ValueError(f"{k!r} is not a valid environment variable name")
        return v

    @model_validator(mode="after")
    def _has_something_to_run(self) -> TaskSpec:
        if not (self.run or "").strip():
            # SkyPilot accepts a setup-only task (it prepares a cluster that SkyPilot keeps);
            # launch tears each attempt's cluster down when its job ends, so setup alone would
            # be run and thrown away.
            if (self.setup or "").strip():
                raise ValueError("the task has `setup` but no `run`: nothing to launch (each attempt's cluster is torn "
                                 "down when its job ends, so a setup-only task would do nothing lasting); "
                                 "put the job's commands in `run:`")
            raise ValueError("the task has neither `run` nor `setup`: nothing to launch")
        overlap = set(self.envs) & set(self.secrets)
        if overlap:
            raise ValueError(f"{sorted(overlap)} appear in both `envs` and `secrets`")
        return self

    @property
    def display_name(self) -> str:
        return self.name or "task"

    def env_strings(self) -> dict[str, str]:
        """envs and secrets as the job sees them (None -> '', bools lowercase like YAML)."""
        out: dict[str, str] = {}
        for k, v in {**self.envs, **self.secrets}.items():
            out[k] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
        return out

    def secret_values(self) -> tuple[str, ...]:
        """The values of `secrets:` as the job sees them (what stored logs must not show)."""
        env = self.env_strings()
        return tuple(env[k] for k in self.secrets)

    @property
    def wants_gpu(self) -> bool:
        """True when every alternative that is not explicitly `local` asks for a GPU."""
        alts = [a for a in self.resources.alternatives() if not a.placement().is_local]
        return bool(alts) and all(a.accelerators for a in alts)
