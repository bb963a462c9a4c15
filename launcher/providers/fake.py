"""An in-memory provider with the semantics of the real ones, for fast controller/reaper tests.

The shared contract suite (tests/providers/test_contract.py) runs against this class, moto
(aws) and a local Compute REST server (gcp), so the fake cannot drift from the real providers.

Failure injection: `preempt()` reclaims a spot instance, `fail_next()` makes the next calls of an
operation raise (a TransientProviderError unless told otherwise), `throttle()` makes them
throttle (absorbed up to `max_retries`, like botocore's retry modes; beyond that a ProviderError,
as a real provider raises after its retries).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from launcher.errors import ProviderError, TransientProviderError
from launcher.providers.base import (
    MANAGED_BY_TAG,
    MANAGED_BY_VALUE,
    ClusterHandle,
    ClusterRequest,
    CredentialStatus,
    IdleSignals,
    InstanceInfo,
    Node,
    Provider,
)
from launcher.providers.notice import FAKE_NOTICE, PreemptionNoticeSource

LIVE_STATES = ("pending", "running", "stopping", "stopped")
OPERATIONS = (
    "provision",
    "terminate",
    "terminate_instance",
    "list_instances",
    "idle_signals",
    "tag_instance",
    "stop_instance",
)


@dataclass
class _Instance:
    info: InstanceInfo
    ip: str
    gpu_utilization_pct: float | None = None
    cpu_utilization_pct: float | None = None
    preempted: bool = False


@dataclass
class _Fault:
    remaining: int
    make_error: Callable[[], Exception]
    throttle: bool = False


@dataclass
class FakeProvider(Provider):
    """`regions` bounds where instances may live; `clock` gives launch times (inject in tests)."""

    regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1")
    enabled: bool = True
    max_retries: int = 3
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    name: str = "fake"
    calls: list[tuple[str, tuple]] = field(default_factory=list)  # every API call, for assertions
    throttled_calls: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._instances: dict[str, _Instance] = {}
        self._ids = itertools.count(1)
        self._faults: dict[str, list[_Fault]] = {}

    # ---- failure injection --------------------------------------------------------------------
    def fail_next(self, operation: str, error: Exception | None = None, times: int = 1) -> None:
        self._check_op(operation)
        # A transient fault (like a dropped connection): the kind callers may try again.
        make = (lambda: error) if error is not None else (lambda: TransientProviderError(f"fake {operation} failed (injected)"))
        self._faults.setdefault(operation, []).append(_Fault(times, make))

    def throttle(self, operation: str, times: int) -> None:
        self._check_op(operation)
        self._faults.setdefault(operation, []).append(
            _Fault(times, lambda: ProviderError(f"fake {operation}: throttled after {self.max_retries} retries"), True)
        )

    def preempt(self, instance_id: str) -> None:
        """Reclaim a spot instance as the cloud would (state -> terminated, preempted flag)."""
        with self._lock:
            inst = self._instances[instance_id]
            if not inst.info.spot:
                raise ValueError(f"{instance_id} is on-demand; only spot instances are preempted")
            inst.info = replace(inst.info, state="terminated")
            inst.preempted = True

    def set_utilization(self, instance_id: str, *, gpu_pct: float | None, cpu_pct: float | None) -> None:
        with self._lock:
            inst = self._instances[instance_id]
            inst.gpu_utilization_pct, inst.cpu_utilization_pct = gpu_pct, cpu_pct

    def add_instance(
        self,
        region: str,
        *,
        tags: dict[str, str],
        instance_type: str = "g5.xlarge",
        spot: bool = True,
        state: str = "running",
        zone: str | None = None,
        launched_at: datetime | None = None,
    ) -> str:
        """Seed an instance as a stack (or a user, for untagged ones) would have created it."""
        if region not in self.regions:
            raise ValueError(f"region {region!r} not in {self.regions}")
        with self._lock:
            n = next(self._ids)
            iid = f"fake-{n:06d}"
            info = InstanceInfo(
                provider=self.name,
                region=region,
                zone=zone or f"{region}a",
                instance_id=iid,
                instance_type=instance_type,
                state=state,
                spot=spot,
                tags=dict(tags),
                launched_at=launched_at or self.clock(),
            )
            self._instances[iid] = _Instance(info=info, ip=f"10.0.{n // 256}.{n % 256}")
            return iid

    # ---- Provider -----------------------------------------------------------------------------
    def credentials(self) -> CredentialStatus:
        return CredentialStatus(self.name, self.enabled, "in-memory fake" if self.enabled else "disabled in test")

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        self._call("provision", request.cluster)
        region = request.offer.region
        tags = {**request.tags, MANAGED_BY_TAG: MANAGED_BY_VALUE, "cluster": request.cluster}
        ids = [
            self.add_instance(
                region,
                tags=tags,
                instance_type=request.offer.instance_type,
                spot=request.offer.spot,
                zone=request.offer.zone,
            )
            for _ in range(request.num_nodes)
        ]
        nodes = tuple(Node(iid, self._instances[iid].ip, rank) for rank, iid in enumerate(ids))
        return ClusterHandle(request.cluster, self.name, region, request.offer.zone or f"{region}a", nodes)

    def terminate(self, handle: ClusterHandle) -> None:
        self._call("terminate", handle.cluster)
        with self._lock:
            ids = {n.instance_id for n in handle.nodes}
            ids |= {
                iid
                for iid, inst in self._instances.items()
                if inst.info.tags.get("cluster") == handle.cluster and inst.info.region == handle.region
            }
            for iid in ids:
                self._terminate(iid)

    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        self._call("list_instances", tuple(sorted((tag_filter or {}).items())))
        want = {MANAGED_BY_TAG: MANAGED_BY_VALUE, **(tag_filter or {})}
        with self._lock:
            return [
                inst.info
                for inst in self._instances.values()
                if inst.info.state in LIVE_STATES and all(inst.info.tags.get(k) == v for k, v in want.items())
            ]

    def list_instances_partial(
        self, tag_filter: dict[str, str] | None = None
    ) -> tuple[list[InstanceInfo], dict[str, str]]:
        try:
            return self.list_instances(tag_filter), {}
        except ProviderError as e:
            return [], {"all-regions": e.message}

    def instance_state(self, region: str, instance_id: str) -> str | None:
        with self._lock:
            inst = self._instances.get(instance_id)
            return inst.info.state if inst and inst.info.region == region else None

    def terminate_instance(self, region: str, instance_id: str) -> None:
        self._call("terminate_instance", instance_id)
        with self._lock:
            inst = self._instances.get(instance_id)
            if inst is not None and inst.info.region == region:
                self._terminate(instance_id)

    def stop_instance(self, region: str, instance_id: str) -> None:
        self._call("stop_instance", instance_id)
        with self._lock:
            inst = self._instances.get(instance_id)
            if inst is not None and inst.info.state in ("pending", "running"):
                inst.info = replace(inst.info, state="stopped")

    def tag_instance(self, region: str, instance_id: str, tags: dict[str, str]) -> None:
        self._call("tag_instance", instance_id)
        with self._lock:
            inst = self._instances[instance_id]
            inst.info = replace(inst.info, tags={**inst.info.tags, **tags})

    def untag_instance(self, region: str, instance_id: str, keys: list[str]) -> None:
        self._call("tag_instance", instance_id)
        with self._lock:
            inst = self._instances[instance_id]
            inst.info = replace(inst.info, tags={k: v for k, v in inst.info.tags.items() if k not in keys})

    def idle_signals(self, instance: InstanceInfo, window_minutes: int) -> IdleSignals:
        self._call("idle_signals", instance.instance_id)
        with self._lock:
            inst = self._instances.get(instance.instance_id)
            if inst is None:
                return IdleSignals(None, None, 0)
            known = [v for v in (inst.gpu_utilization_pct, inst.cpu_utilization_pct) if v is not None]
            # The fake's utilization is declared as the average over the whole window.
            covered = float(window_minutes)
            return IdleSignals(inst.gpu_utilization_pct, inst.cpu_utilization_pct, samples=len(known),
                               gpu_covered_minutes=covered, cpu_covered_minutes=covered)

    def idle_signals_many(self, instances, window_minutes: int) -> dict[str, IdleSignals]:
        """Batch form, as aws/gcp offer it (one metrics query per region / project)."""
        return {i.instance_id: self.idle_signals(i, window_minutes) for i in instances}

    # ---- extras shared with aws/gcp -----------------------------------------------------------
    def was_preempted(self, region: str, instance_id: str) -> bool:
        with self._lock:
            inst = self._instances.get(instance_id)
            return bool(inst and inst.preempted)

    def preemption_notice_source(self) -> PreemptionNoticeSource:
        return FAKE_NOTICE

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        with self._lock:
            for node in handle.nodes:
                inst = self._instances.get(node.instance_id)
                if inst is None or inst.info.state != "running":
                    if inst is None:
                        why = "gone"
                    else:
                        why = "reclaimed (spot)" if inst.preempted else inst.info.state
                    return f"instance {node.instance_id} {why}"
        return None

    # ---- internals ----------------------------------------------------------------------------
    def _terminate(self, iid: str) -> None:
        inst = self._instances[iid]
        if inst.info.state != "terminated":
            inst.info = replace(inst.info, state="terminated")

    @staticmethod
    def _check_op(operation: str) -> None:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")

    def _call(self, operation: str, arg: object) -> None:
        """Record the call and apply injected faults (throttles up to max_retries are retried)."""
        with self._lock:
            self.calls.append((operation, (arg,)))
            faults = self._faults.get(operation, [])
            attempts = self.max_retries + 1
            if faults:
                fault = faults[0]
                used = min(fault.remaining, attempts) if fault.throttle else 1
                fault.remaining -= used
                if fault.remaining == 0:
                    faults.pop(0)
                if fault.throttle:
                    self.throttled_calls += used
                    if used < attempts:  # a retry got through
                        return
                raise fault.make_error()
