"""What the ledger stores and returns: frozen dataclasses and the vocabularies (str enums).

States and kinds are stored as plain strings, so a new value needs no migration; the enums are
the vocabulary callers should use. All datetimes are timezone-aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from launcher.provenance import Provenance


class RunState(StrEnum):
    PENDING = "pending"  # recorded, nothing provisioned yet
    PROVISIONING = "provisioning"
    RUNNING = "running"
    RECOVERING = "recovering"  # an attempt ended by preemption/node loss; next one being set up
    STOPPING = "stopping"  # `down` or budget stop in progress (teardown)
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_STOPPED = "budget_stopped"


TERMINAL_RUN_STATES: frozenset[str] = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.BUDGET_STOPPED}
)


# attempt end reasons that count as a preemption in costs and reports
PREEMPTED_REASONS: tuple[str, ...] = ("preempted", "node_lost")


class AttemptState(StrEnum):
    PROVISIONING = "provisioning"
    SETUP = "setup"
    RUNNING = "running"
    ENDED = "ended"  # see AttemptRecord.end_reason


class EndReason(StrEnum):
    """Why an attempt ended (also used as a run's end_reason where it fits)."""

    COMPLETED = "completed"
    PREEMPTED = "preempted"
    NODE_LOST = "node_lost"
    FAILED = "failed"  # user code exited non-zero
    SETUP_FAILED = "setup_failed"
    PROVISION_FAILED = "provision_failed"
    CANCELLED = "cancelled"
    BUDGET_STOP = "budget_stop"
    ABANDONED = "abandoned"  # found open after a controller crash and closed by cleanup
    MOVED = "moved"  # the placement policy moved the job elsewhere (it checkpointed and stopped)
    DISK_FULL = "disk_full"  # the disk holding the run (its logs, the ledger) filled up: the run ended


class EventKind(StrEnum):
    STATE_CHANGE = "state_change"  # written by set_run_state itself
    PROVISION = "provision"
    PREEMPTION = "preemption"
    NODE_LOST = "node_lost"
    CHECKPOINT = "checkpoint"
    RECOVERY = "recovery"
    TEARDOWN = "teardown"
    BUDGET_STOP = "budget_stop"
    LOG = "log"
    LOOK = "look"  # an attempt opened to launch spot before the running job is moved to it


class ClusterState(StrEnum):
    PROVISIONING = "provisioning"
    UP = "up"
    STOPPED = "stopped"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class RunRecord:
    """One run (one `launch`). Provenance fields are flat columns; tags live in the tags table."""

    run_id: str
    name: str
    spec_hash: str
    spec_yaml: str
    project: str = "default"
    experiment: str | None = None
    owner: str | None = None
    cost_center: str | None = None
    state: str = RunState.PENDING
    budget_usd: float | None = None
    deadline_at: datetime | None = None
    # provenance
    code_revision: str | None = None
    code_dirty_hash: str | None = None
    lockfile_hash: str | None = None
    image: str | None = None
    seeds: dict[str, int] | None = None
    data_hash: str | None = None
    host: str | None = None
    launcher_version: str | None = None
    # set by the ledger (values passed to create_run are ignored, except created_at if given)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_provenance(
        cls,
        prov: Provenance,
        *,
        name: str,
        spec_yaml: str,
        project: str = "default",
        experiment: str | None = None,
        owner: str | None = None,
        cost_center: str | None = None,
        budget_usd: float | None = None,
        deadline_at: datetime | None = None,
        tags: dict[str, str] | None = None,
    ) -> RunRecord:
        return cls(
            run_id=prov.run_id,
            name=name,
            spec_hash=prov.spec_hash,
            spec_yaml=spec_yaml,
            project=project,
            experiment=experiment,
            owner=owner,
            cost_center=cost_center,
            budget_usd=budget_usd,
            deadline_at=deadline_at,
            code_revision=prov.code_revision,
            code_dirty_hash=prov.code_dirty_hash,
            lockfile_hash=prov.lockfile_hash,
            image=prov.image,
            seeds=dict(prov.seeds) if prov.seeds is not None else None,
            data_hash=prov.data_hash,
            host=prov.host,
            launcher_version=prov.launcher_version,
            created_at=prov.created_at,
            tags=dict(tags or {}),
        )

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_RUN_STATES

    def with_(self, **changes: Any) -> RunRecord:
        return replace(self, **changes)


@dataclass(frozen=True)
class NewAttempt:
    """What the controller knows when it starts an attempt (usually copied from an Offer).

    `price_usd_per_hour` is per node (instance); the attempt's cost is
    billed_seconds / 3600 * price_usd_per_hour * num_nodes.
    """

    cloud: str
    region: str
    instance_type: str
    price_usd_per_hour: float
    zone: str | None = None
    accelerator: str | None = None
    accelerator_count: int = 0
    num_nodes: int = 1
    spot: bool = False
    on_demand_price_usd_per_hour: float | None = None
    cluster: str | None = None
    # the cloud account billed, when the provider knows it (AWS account id, GCP project)
    billing_account_id: str | None = None
    billing_account_name: str | None = None

    @classmethod
    def from_offer(cls, offer: Any, *, num_nodes: int = 1, cluster: str | None = None) -> NewAttempt:
        """From a `pricing.models.Offer` (duck-typed so this module does not import pricing)."""
        return cls(
            cloud=offer.cloud,
            region=offer.region,
            zone=offer.zone,
            instance_type=offer.instance_type,
            accelerator=offer.accelerator,
            accelerator_count=offer.accelerator_count,
            num_nodes=num_nodes,
            spot=offer.spot,
            price_usd_per_hour=offer.price_usd_per_hour,
            on_demand_price_usd_per_hour=offer.on_demand_price_usd_per_hour,
            cluster=cluster,
        )


@dataclass(frozen=True)
class AttemptRecord:
    attempt_id: str  # f"{run_id}-a{seq}"
    run_id: str
    seq: int  # 1, 2, ... per run
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    accelerator: str | None
    accelerator_count: int
    num_nodes: int
    spot: bool
    price_usd_per_hour: float
    on_demand_price_usd_per_hour: float | None
    cluster: str | None
    state: str
    started_at: datetime
    ended_at: datetime | None = None
    end_reason: str | None = None
    exit_code: int | None = None
    billed_seconds: float | None = None
    billing_account_id: str | None = None
    billing_account_name: str | None = None

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True)
class EventRecord:
    id: int
    run_id: str
    attempt_id: str | None
    at: datetime
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ClusterRecord:
    name: str
    provider: str
    region: str | None = None
    zone: str | None = None
    stack: str | None = None  # Pulumi stack, when provisioned through infra/
    state: str = ClusterState.PROVISIONING
    run_id: str | None = None
    project: str | None = None
    nodes: list[dict[str, Any]] = field(default_factory=list)  # e.g. [{"instance_id", "ip", "rank"}]
    created_at: datetime | None = None  # set by the ledger on first upsert when None
    updated_at: datetime | None = None
    terminated_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReapAuditRecord:
    """One instance considered by one reaper pass (decision keep|mark|act|skip)."""

    provider: str
    region: str
    instance_id: str
    decision: str
    action: str | None = None  # stop | destroy | tag-mark | clear-mark | None
    reasons: list[str] = field(default_factory=list)
    hourly_price_usd: float | None = None
    estimated_saving_usd: float | None = None
    ok: bool = True
    error: str | None = None
    dry_run: bool = False
    pass_id: str | None = None
    cluster: str | None = None
    project: str | None = None
    at: datetime | None = None  # set by the ledger when None
    id: int | None = None  # set by the ledger
