"""The provider interface (dstack's shape): a small required core plus opt-in capabilities.

Required: credentials, provision, terminate (idempotent: already gone = success), list_instances.
Opt-in capabilities are declared Protocols, checked with isinstance: PreemptionNotices,
ReclaimCheck, SpotCapacity, SpotPlacementScores, PartialListing, BillingAccounts, and the reaper's
instance operations IdleSignalSource, BatchIdleSignals, InstanceMarks, InstanceStop,
InstanceTermination (a provider without one cannot do it; nothing raises NotImplementedError).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from pricing.models import Offer

from infra.tags import MANAGED_BY_TAG, MANAGED_BY_VALUE, REQUIRED_TAGS  # noqa: F401 - the one tag vocabulary
from launcher.providers.credentials import CredentialStatus  # noqa: F401 - part of the interface


@dataclass(frozen=True)
class BillingAccountRef:
    """The cloud account a provider's charges bill to (FOCUS BillingAccountId / Name)."""

    id: str
    name: str


@dataclass(frozen=True)
class ClusterRequest:
    cluster: str  # cluster name, unique per project
    offer: Offer
    num_nodes: int
    tags: dict[str, str]
    image_id: str | None = None
    disk_size_gib: int | None = None
    ssh_allowed_cidr: str | None = None


@dataclass(frozen=True)
class Node:
    instance_id: str
    ip: str | None
    rank: int


@dataclass(frozen=True)
class ClusterHandle:
    cluster: str
    provider: str
    region: str
    zone: str | None
    nodes: tuple[Node, ...]
    stack: str | None = None  # Pulumi stack name, when provisioned through infra/
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InstanceInfo:
    provider: str
    region: str
    zone: str | None
    instance_id: str
    instance_type: str
    state: str  # normalized: pending | running | stopping | stopped | terminated
    spot: bool
    tags: dict[str, str]
    launched_at: datetime | None = None  # the cloud's own record (LaunchTime, creationTimestamp)
    hourly_price_usd: float | None = None
    metrics_period_s: int | None = None  # the hypervisor metrics' period (EC2: 300 basic, 60 detailed)


@dataclass(frozen=True)
class MetricPoint:
    """One monitoring datapoint: it stands for [start, start + period_s)."""

    start: datetime
    period_s: int
    mean: float  # the period's Average (percent)
    peak: float  # the period's Maximum (percent)


NORMAL_DELAY_S = 300  # monitoring services publish a period within a few minutes of its end


@dataclass(frozen=True)
class MetricCoverage:
    """Which part of the window a series covers (launcher.providers.metric_window): the judged
    window ends with the newest delivered point when it is only late (within the allowance)."""

    period_s: int  # the series' real period (the longest seen)
    window_start: datetime
    window_end: datetime
    gaps: tuple[tuple[datetime, datetime], ...]  # parts of the judged window without data
    peak_pct: float | None  # highest Maximum since window_start (busy once is busy)
    peak_at: datetime | None
    asked_until: datetime = field(compare=False)  # the end asked for (the provider's clock)

    @property
    def undelivered(self) -> tuple[datetime, datetime] | None:
        """The newest minutes not delivered yet (late), not counted either way. The period in
        progress and the usual publishing delay after it (NORMAL_DELAY_S) are not called late."""
        late = (self.asked_until - self.window_end).total_seconds() > self.period_s + NORMAL_DELAY_S
        return (self.window_end, self.asked_until) if late else None


@dataclass(frozen=True)
class IdleSignals:
    """Utilization over a window; None = not published / unknown.

    `*_covered_minutes`: how much of the asked window the figure really covers (the periods of the
    datapoints laid end to end, or the job's age); None = unknown, which is never idle evidence.
    `*_coverage`: where the figure came from a monitoring series, its gaps and peak.
    `error`: the signals could not be read for this instance (after bounded retries): unknown."""

    gpu_utilization_pct: float | None
    cpu_utilization_pct: float | None
    samples: int = 0
    gpu_covered_minutes: float | None = None
    cpu_covered_minutes: float | None = None
    gpu_coverage: MetricCoverage | None = None
    cpu_coverage: MetricCoverage | None = None
    error: str | None = None


class Provider(abc.ABC):
    name: str

    @abc.abstractmethod
    def credentials(self) -> CredentialStatus: ...

    @abc.abstractmethod
    def provision(self, request: ClusterRequest) -> ClusterHandle: ...

    @abc.abstractmethod
    def terminate(self, handle: ClusterHandle) -> None:
        """Idempotent: a cluster that is already gone is success."""

    @abc.abstractmethod
    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        """Instances carrying our managed tag (and tag_filter), across regions."""

    # Optional capabilities are the Protocols below (PreemptionNotices, ReclaimCheck, SpotCapacity,
    # SpotPlacementScores, PartialListing, the reaper's IdleSignalSource, BatchIdleSignals,
    # InstanceMarks, InstanceStop, InstanceTermination): callers check them with isinstance.
    notice_poll_s: float | None = None  # how often the controller may ask preemption_notice (None: its default)

    def instance_state(self, region: str, instance_id: str) -> str | None:
        for inst in self.list_instances():
            if inst.instance_id == instance_id:
                return inst.state
        return None


# ---- optional capabilities: a provider has one when it defines the method -------------------------


@runtime_checkable
class PreemptionNotices(Protocol):
    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        """Seen from outside the instance: a reason string when a node of the cluster was
        reclaimed (spot interruption) or is being reclaimed, else None."""


@runtime_checkable
class ReclaimCheck(Protocol):
    def was_preempted(self, region: str, instance_id: str) -> bool:
        """Whether the cloud reclaimed this (gone) instance, as opposed to it failing."""


@runtime_checkable
class SpotCapacity(Protocol):
    def spot_available(self, offer: Offer, now: datetime) -> bool | None:
        """Whether spot capacity for this offer exists right now; None = unknown (try it)."""


@runtime_checkable
class SpotPlacementScores(Protocol):
    def spot_placement_scores(self, offers: Sequence[Offer], num_nodes: int) -> dict[Offer, int]:
        """The cloud's score (1-10, 10 = a request is most likely to succeed) for getting `num_nodes`
        spot instances of each offer now. Offers it cannot score are left out; raises ProviderError
        when the cloud refuses to answer (the caller decides whether that matters)."""


@runtime_checkable
class PartialListing(Protocol):
    def list_instances_partial(
        self, tag_filter: dict[str, str] | None = None
    ) -> tuple[list[InstanceInfo], dict[str, str]]:
        """Like list_instances, but a failing region is reported ({region: error}) instead of
        hiding the others."""


@runtime_checkable
class IdleSignalSource(Protocol):
    def idle_signals(self, instance: InstanceInfo, window_minutes: int) -> IdleSignals:
        """Utilization of one instance over the window (the reaper's metrics). A provider without
        it publishes none: its instances' utilization is unknown, never idle."""


@runtime_checkable
class InstanceMarks(Protocol):
    """Tags (GCP: labels; local: the ledger) on one instance: the reaper's dated mark."""

    def tag_instance(self, region: str, instance_id: str, tags: dict[str, str]) -> None: ...

    def untag_instance(self, region: str, instance_id: str, keys: list[str]) -> None: ...


@runtime_checkable
class InstanceTermination(Protocol):
    def terminate_instance(self, region: str, instance_id: str) -> None:
        """Terminate one instance (an orphan, or a node of a cluster without a stack).
        Idempotent: an unknown or already-terminated instance is success."""


@runtime_checkable
class InstanceStop(Protocol):
    def stop_instance(self, region: str, instance_id: str) -> None:
        """Stop one instance (disk kept): the reaper's `stop` action."""


@runtime_checkable
class BatchIdleSignals(Protocol):
    def idle_signals_many(self, instances: list[InstanceInfo], window_minutes: int) -> dict[str, IdleSignals]:
        """Idle signals of many instances in few calls (e.g. one CloudWatch get_metric_data)."""


@runtime_checkable
class BillingAccounts(Protocol):
    def billing_account(self) -> BillingAccountRef | None:
        """The account this provider's machines bill to, asked once and remembered; None when
        it cannot be told (no credentials, no permission): never an error, it only labels."""
