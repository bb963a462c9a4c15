"""The declared-cluster entry: where SkyPilot reaches it, what a node holds, what an hour costs."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pricing.clouds import DECLARED_CLUSTER_KINDS, canonical_cloud

CLUSTER_KINDS = DECLARED_CLUSTER_KINDS  # pricing.clouds owns the names; kept under the clusters' name

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_Model = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see config_file.defaults


def parse_infra(value: str) -> tuple[str, str]:
    """'slurm/<cluster>' | 'k8s/<context>' | 'kubernetes/<context>' | 'ssh/<pool>' -> (kind, target)."""
    parts = value.strip().split("/")
    kind = canonical_cloud(parts[0])
    if kind not in DECLARED_CLUSTER_KINDS or len(parts) != 2 or not parts[1]:
        raise ValueError(
            f"infra is slurm/<cluster>, k8s/<context> or ssh/<pool> (got {value!r})"
        )
    return kind, parts[1]


class ClusterEntry(BaseModel):
    """One cluster. Prices are the team's internal rates (default 0: already paid for)."""

    model_config = _Model

    name: str
    infra: str
    gpu: str | None = None  # GPU model on each node, e.g. 'A100-80GB'; None: CPU nodes
    gpus_per_node: int = Field(default=0, ge=0)
    nodes: int = Field(default=1, ge=1)
    cpus_per_node: float | None = Field(default=None, gt=0)
    memory_gib_per_node: float | None = Field(default=None, gt=0)
    price_usd_per_gpu_hour: float = Field(default=0.0, ge=0)
    price_usd_per_node_hour: float = Field(default=0.0, ge=0)
    preemptible: bool = False  # jobs there can be preempted (a scavenger partition, spot nodes)
    # Where jobs keep checkpoints on the cluster's shared filesystem (~ = the job user's home).
    checkpoint_dir: str = "~/.launcher-checkpoints"
    # Shell lines run before the job's setup and run there (`module load ...`, a PATH entry).
    job_prefix: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"name must be lowercase letters, digits and '-', starting with a letter, at most 40 (got {v!r})")
        return v

    @field_validator("infra")
    @classmethod
    def _infra(cls, v: str) -> str:
        kind, target = parse_infra(v)
        return f"{kind}/{target}"

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str | None) -> str | None:
        if v is None:
            return None
        from pricing.gpus import KNOWN_GPUS, normalize_gpu_name

        name = normalize_gpu_name(v)
        if name is None:
            from launcher.errors import did_you_mean

            hint = did_you_mean(v, KNOWN_GPUS)
            raise ValueError(f"unknown GPU {v!r}" + (f"; {hint}" if hint else ""))
        return name

    @model_validator(mode="after")
    def _gpus(self) -> ClusterEntry:
        if self.gpu and self.gpus_per_node == 0:
            raise ValueError("gpus_per_node: a cluster with a `gpu` needs gpus_per_node >= 1")
        if self.gpus_per_node and not self.gpu:
            raise ValueError("gpu: say which GPU the nodes have when gpus_per_node > 0")
        return self

    @property
    def kind(self) -> str:
        return parse_infra(self.infra)[0]

    @property
    def target(self) -> str:
        return parse_infra(self.infra)[1]

    @property
    def price_usd_per_node_hour_total(self) -> float:
        return self.price_usd_per_gpu_hour * self.gpus_per_node + self.price_usd_per_node_hour


class ClustersFile(BaseModel):
    model_config = _Model

    clusters: list[ClusterEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> ClustersFile:
        seen: set[str] = set()
        for c in self.clusters:
            if c.name in seen:
                raise ValueError(f"clusters: {c.name!r} is declared twice")
            seen.add(c.name)
        return self

    def get(self, name: str) -> ClusterEntry | None:
        return next((c for c in self.clusters if c.name == name), None)
