"""Test doubles for controller tests: a scriptable provider and executor.

They record what the controller asked for, and let a test check the ledger at the moment an
action happens (to prove each transition is written before it takes effect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from launcher.errors import ProviderError
from launcher.executors.base import ExecRequest, ExecResult, Execution, Executor, Outcome, RankExit
from launcher.providers.base import ClusterHandle, ClusterRequest, CredentialStatus, Node, Provider
from pricing.models import Offer, ScoredOffer


class Clock:
    """An injected clock that moves only when the controller sleeps (never by less than 1 ms)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(s, 0.001)


def offer(region: str, price: float, *, cloud: str = "fake", spot: bool = True) -> Offer:
    return Offer(
        cloud=cloud, region=region, zone=None, instance_type="g.xl", accelerator="T4", accelerator_count=1,
        vcpus=4, memory_gib=16, gpu_memory_gib=16, spot=spot, price_usd_per_hour=price,
        on_demand_price_usd_per_hour=price * 3,
    )  # fmt: skip


def scored(o: Offer, rank: int) -> ScoredOffer:
    return ScoredOffer(o, rank, 0.01, "<5%", None, 1.0, o.price_usd_per_hour)


class ScriptedProvider(Provider):
    name = "fake"

    def __init__(self, *, fail_regions: set[str] = frozenset(), notices: dict[int, float] | None = None,
                 on_provision: Callable[[ClusterRequest], None] | None = None) -> None:  # fmt: skip
        self.fail_regions = set(fail_regions)
        self.notices = notices or {}  # placement index -> seconds after which a notice comes
        self.on_provision = on_provision
        self.provisioned: list[ClusterRequest] = []
        self.terminated: list[str] = []

    def credentials(self) -> CredentialStatus:
        return CredentialStatus("fake", True, "test")

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        if self.on_provision:
            self.on_provision(request)
        self.provisioned.append(request)
        if request.offer.region in self.fail_regions:
            raise ProviderError(f"no capacity in {request.offer.region}")
        nodes = tuple(Node(f"i-{request.cluster}-{r}", "10.0.0.1", r) for r in range(request.num_nodes))
        return ClusterHandle(request.cluster, "fake", request.offer.region, None, nodes)

    def terminate(self, handle: ClusterHandle) -> None:
        self.terminated.append(handle.cluster)

    def list_instances(self, tag_filter=None):
        return []

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        idx = len(self.provisioned) - 1
        delay = self.notices.get(idx)
        return f"notice after {delay}s" if delay is not None and running_s >= delay else None


@dataclass
class ScriptedExecution(Execution):
    outcome: Outcome | None  # None: runs until stopped or preempted
    exit_code: int = 0
    polls_before_end: int = 1
    phase: str = "run"
    stopped: bool = False
    notified: bool = False
    _polls: int = 0
    _result: ExecResult | None = None
    request: ExecRequest | None = None

    def poll(self) -> ExecResult | None:
        if self._result is not None:
            return self._result
        self._polls += 1
        if self.notified:
            self._result = ExecResult(Outcome.PREEMPTED, 75, "run", (RankExit(0, "run", 75),))
        elif self.outcome is not None and self._polls > self.polls_before_end:
            phase = "setup" if self.outcome is Outcome.SETUP_FAILED else "run"
            self._result = ExecResult(self.outcome, self.exit_code, phase, (RankExit(0, phase, self.exit_code),), detail=f"exit {self.exit_code}")
        return self._result

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        return self.poll()

    def stop(self, grace_s: float = 10.0) -> ExecResult:
        self.stopped = True
        if self._result is None:
            self._result = ExecResult(Outcome.CANCELLED, 143, "run", (RankExit(0, "run", 143),))
        return self._result

    def notify_preemption(self, grace_s: float = 10.0) -> None:
        self.notified = True

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()


@dataclass
class ScriptedExecutor(Executor):
    """Attempt i gets script[i] (the last entry repeats)."""

    script: list[Callable[[], ScriptedExecution]]
    started: list[ScriptedExecution] = field(default_factory=list)
    on_start: Callable[[ExecRequest], None] | None = None
    name: str = "scripted"

    def start(self, request: ExecRequest, handle: ClusterHandle) -> ScriptedExecution:
        if self.on_start:
            self.on_start(request)
        make = self.script[min(len(self.started), len(self.script) - 1)]
        ex = make()
        ex.request = request
        self.started.append(ex)
        return ex
