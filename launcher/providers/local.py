"""The embedded local backend: this machine as a zero-cost, CPU-only "cloud".

`provision` hands back `num_nodes` logical nodes on 127.0.0.1 (the local executor starts one
process group per node); `terminate` has nothing to release (the executor stops processes).

It can also act as *simulated spot capacity*: give it a `PreemptionSchedule` and it announces a
preemption notice to the controller once an attempt has run for the scheduled number of seconds
(the controller then delivers SIGTERM to the job, the job checkpoints and exits with
PREEMPTED_EXIT_CODE, and the controller recovers on the next placement). With a schedule the
local offer is marked `spot=True`, so policies see it as spot capacity. With a `SpotTrace` it
follows real spot availability instead: provisioning spot fails while the trace has no capacity,
a running spot cluster gets a notice when capacity goes, and `spot_available` tells the
controller (and so the recovery policy) whether capacity is there now. With `zone_traces` (one
trace per named zone) it is several zones of simulated spot capacity: one spot offer per zone
(`offers()`), each following its own trace, so `multi-zone` placement runs end to end locally.

Prices: the local machine costs nothing, so by default every attempt costs $0. To see the cost
side of a simulation (attempt costs, a spot/on-demand trade-off) give the simulated capacity a
notional price: `LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR=SPOT[,ON_DEMAND]` (or the constructor's
`prices`). It applies only in simulated-spot mode; the ledger then bills attempts at that price.
An on-demand variant of this machine (`offer(spot=False)`) is never preempted and ignores the trace.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, replace

from launcher.errors import ProviderError
from launcher.providers.local_instances import StopCluster
from launcher.providers.base import (
    ClusterHandle,
    ClusterRequest,
    CredentialStatus,
    IdleSignals,
    InstanceInfo,
    Node,
    Provider,
)
from pricing.models import Offer

LOCAL_CLOUD = "local"
LOCAL_REGION = "local"
LOCAL_INSTANCE_TYPE = "local-cpu"
SIMULATE_PRICE_ENV = "LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR"


@dataclass(frozen=True)
class SimulatedPrices:
    """Notional prices (USD per hour per node) of simulated capacity; on-demand defaults to spot."""

    spot_usd_per_hour: float = 0.0
    on_demand_usd_per_hour: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> SimulatedPrices:
        """'0.3' or '0.3,0.9' (spot, on-demand); empty/None = free."""
        if not text or not text.strip():
            return cls()
        try:
            values = [float(x) for x in text.split(",")]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or any(v < 0 or v != v for v in values):
            from launcher.errors import BadInputError

            raise BadInputError(
                f"{SIMULATE_PRICE_ENV} takes SPOT or SPOT,ON_DEMAND in USD per hour, like '0.3,0.9' (got {text!r})"
            )
        return cls(values[0], values[1] if len(values) == 2 else None)

    @property
    def on_demand(self) -> float:
        return self.spot_usd_per_hour if self.on_demand_usd_per_hour is None else self.on_demand_usd_per_hour


@dataclass(frozen=True)
class PreemptionSchedule:
    """Seconds after the start of attempt i's `run` phase (0-based, on this provider) at which
    it is preempted (the controller measures the time; setup is not counted).

    Attempts beyond the list are never preempted, so a schedule of N entries means N
    preemptions and then a run to completion.
    """

    delays_s: tuple[float, ...] = ()

    @classmethod
    def parse(cls, text: str, *, seed: int = 0, horizon_s: float = 60.0) -> PreemptionSchedule:
        """'3' = three preemptions at seeded random times within `horizon_s` of each attempt's
        start; '5,12.5,30' = the listed delays (seconds)."""
        text = text.strip()
        if "," not in text and text.isdigit():
            return cls.random(int(text), seed=seed, horizon_s=horizon_s)
        try:
            delays = tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise ValueError(f"--simulate-preemptions takes N or a list of seconds like '5,12,30' (got {text!r})") from None
        if not delays or any(d <= 0 for d in delays):
            raise ValueError("preemption delays must be positive seconds")
        return cls(delays)

    @classmethod
    def random(cls, n: int, *, seed: int = 0, horizon_s: float = 60.0) -> PreemptionSchedule:
        rng = random.Random(seed)
        lo = min(1.0, horizon_s / 2)
        return cls(tuple(round(rng.uniform(lo, horizon_s), 3) for _ in range(n)))

    def delay_for(self, attempt_index: int) -> float | None:
        return self.delays_s[attempt_index] if 0 <= attempt_index < len(self.delays_s) else None


@dataclass(frozen=True)
class SpotTrace:
    """Spot availability over time (the format of `spot-traces/*.json`: `{"metadata":
    {"gap_seconds": G}, "data": [0|1, ...]}`, 1 = no spot capacity in that tick), replayed
    `speedup` times faster than real time from `start_tick`. After the last tick capacity
    stays available."""

    data: tuple[int, ...]
    gap_seconds: float
    speedup: float = 1.0
    start_tick: int = 0

    @classmethod
    def load(cls, path, *, speedup: float = 1.0, start_tick: int = 0) -> SpotTrace:
        import json

        from launcher.bounded_read import MAX_DATA_BYTES, read_bounded_text
        from launcher.errors import BadInputError

        try:
            raw = json.loads(read_bounded_text(path, "spot trace", MAX_DATA_BYTES))
        except BadInputError as e:
            raise ValueError(e.message) from None
        except ValueError as e:
            raise ValueError(f"cannot read spot trace {str(path)!r}: {e}") from None
        try:
            data = tuple(int(x) for x in raw["data"])
            gap = float(raw["metadata"]["gap_seconds"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"cannot read spot trace {str(path)!r}: {e}") from None
        if gap <= 0 or speedup <= 0 or not (0 <= start_tick < max(len(data), 1)):
            raise ValueError("spot trace: gap_seconds and speedup must be positive, start_tick inside the trace")
        return cls(data, gap, speedup, start_tick)

    def tick_at(self, elapsed_s: float) -> int:
        # The epsilon: a clock summed from sleeps may land a hair before a tick boundary.
        return self.start_tick + int(elapsed_s * self.speedup / self.gap_seconds + 1e-9)

    def available_at(self, elapsed_s: float) -> bool:
        tick = self.tick_at(elapsed_s)
        return tick >= len(self.data) or self.data[tick] == 0


def load_traces(paths, *, speedup: float = 1.0, start_tick: int = 0) -> tuple[SpotTrace | None, dict[str, SpotTrace]]:
    """`--simulate-trace` files: one is the local machine's spot capacity (no zone); several are
    that many zones, each named by its file name without `.json`, in the order given. ValueError
    (readable) on a bad file or two files of one name."""
    paths = [paths] if isinstance(paths, str | os.PathLike) else list(paths or ())
    traces = [SpotTrace.load(p, speedup=speedup, start_tick=start_tick) for p in paths]
    if len(traces) <= 1:
        return (traces[0] if traces else None), {}
    names = [os.path.basename(str(p)).removesuffix(".json") for p in paths]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"--simulate-trace: zones are named by file name, and {dup[0]!r} is given twice")
    return None, dict(zip(names, traces))


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1024 * 1024), 1)
    except OSError:
        pass
    return None


class LocalProvider(Provider):
    name = LOCAL_CLOUD
    notice_poll_s = 0.0  # notices cost nothing here: the controller may ask on every poll

    def __init__(
        self,
        preemptions: PreemptionSchedule | None = None,
        *,
        trace: SpotTrace | None = None,
        zone_traces: dict[str, SpotTrace] | None = None,
        placements_before: int = 0,
        clock=None,
        prices: SimulatedPrices | None = None,
        stop_cluster: StopCluster | None = None,
    ) -> None:
        """`placements_before`: local spot placements this run already had (a resumed controller
        continues the schedule where the previous one stopped). With a `trace`, capacity
        comes and goes as the trace says (time 0 = when this provider was created); with
        `zone_traces`, per zone (the offers' `zone`), in the order given.
        `prices`: notional prices in simulated-spot mode (default: $SIMULATE_PRICE_ENV, else free).
        `stop_cluster(ledger, cluster)`: how the reaper ends a local cluster's run (the CLI passes
        `launcher down`); without it the reaper can mark local clusters but not end them."""
        import time

        self.preemptions = preemptions
        self._stop_cluster = stop_cluster
        if trace is not None and zone_traces:
            raise ValueError("give a trace or zone_traces, not both")
        self.trace = trace
        self.zone_traces = dict(zone_traces or {})
        self.reaper_extra_age_s = 0.0  # tests age the jobs the reaper sees, as they age `now`
        self._clock = clock or time.monotonic
        self._t0 = self._clock()
        self._provisioned = placements_before
        self._attempt_index: dict[str, int] = {}  # spot cluster -> index into the schedule
        self._cluster_zone: dict[str, str | None] = {}  # spot cluster -> its simulated zone
        if prices is None and self.simulated_spot:
            prices = SimulatedPrices.parse(os.environ.get(SIMULATE_PRICE_ENV))
        self.prices = prices if self.simulated_spot and prices is not None else SimulatedPrices()

    # ---- offers -------------------------------------------------------------------------------
    def offer(self, spot: bool | None = None) -> Offer:
        """The local offer: CPU only (no GPUs are exposed, even if present), free unless a
        simulation gives it a notional price. Spot when simulating spot capacity; `spot=False`
        gives the on-demand variant of the same machine (never preempted)."""
        spot = self.simulated_spot if spot is None else spot
        return Offer(
            cloud=LOCAL_CLOUD,
            region=LOCAL_REGION,
            zone=None,
            instance_type=LOCAL_INSTANCE_TYPE,
            accelerator=None,
            accelerator_count=0,
            vcpus=float(os.cpu_count() or 1),
            memory_gib=_memory_gib(),
            gpu_memory_gib=None,
            spot=spot,
            price_usd_per_hour=self.prices.spot_usd_per_hour if spot else self.prices.on_demand,
            on_demand_price_usd_per_hour=self.prices.on_demand,
        )

    def offers(self) -> tuple[Offer, ...]:
        """One spot offer per simulated zone (in the order given), or the one offer."""
        base = self.offer()
        return tuple(replace(base, zone=z) for z in self.zone_traces) if self.zone_traces else (base,)

    @property
    def trace_tick_s(self) -> float | None:
        """Real seconds per trace tick (the shortest, with zones); None without a trace."""
        traces = [self.trace] if self.trace is not None else list(self.zone_traces.values())
        return min((t.gap_seconds / t.speedup for t in traces), default=None)

    @property
    def simulated_spot(self) -> bool:
        return self.preemptions is not None or self.trace is not None or bool(self.zone_traces)

    # ---- Provider -----------------------------------------------------------------------------
    def credentials(self) -> CredentialStatus:
        return CredentialStatus(LOCAL_CLOUD, True, "always available")

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        zone = request.offer.zone
        trace = self._trace(zone)
        if request.offer.spot and trace is not None and not trace.available_at(self._clock() - self._t0):
            where = f" in zone {zone}" if zone else ""
            raise ProviderError(f"no spot capacity{where} (simulated trace, tick {trace.tick_at(self._clock() - self._t0)})")
        if request.offer.spot:
            self._cluster_zone[request.cluster] = zone
            self._attempt_index[request.cluster] = self._provisioned
            self._provisioned += 1
        nodes = tuple(Node(instance_id=f"{request.cluster}-n{r}", ip="127.0.0.1", rank=r) for r in range(request.num_nodes))
        return ClusterHandle(
            cluster=request.cluster,
            provider=LOCAL_CLOUD,
            region=LOCAL_REGION,
            zone=zone,
            nodes=nodes,
        )

    def terminate(self, handle: ClusterHandle) -> None:
        """Nothing to release: the executor owns the processes. Idempotent."""
        self._attempt_index.pop(handle.cluster, None)
        self._cluster_zone.pop(handle.cluster, None)

    # ---- what the reaper sees (launcher/providers/local_instances.py) --------------------------
    def _ledger(self):
        if getattr(self, "_led", None) is None:
            from launcher.ledger import Ledger

            self._led = Ledger()
        return self._led

    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        """Local clusters the ledger records as up whose job processes are alive."""
        from launcher.providers import local_instances as li

        want = {"managed-by": "gpu-launcher", **(tag_filter or {})}
        return li.list_local_instances(self._ledger(), want, instance_type=LOCAL_INSTANCE_TYPE)

    def idle_signals(self, instance: InstanceInfo, window_minutes: int) -> IdleSignals:
        """CPU of the job's processes since it started, and now (there is no metrics history here)."""
        from launcher.providers import local_instances as li

        return li.local_idle_signals(self._ledger(), instance, window_minutes, extra_age_s=self.reaper_extra_age_s)

    def tag_instance(self, region: str, instance_id: str, tags: dict[str, str]) -> None:
        from launcher.providers import local_instances as li

        li.set_local_tags(self._ledger(), instance_id, tags)

    def untag_instance(self, region: str, instance_id: str, keys: list[str]) -> None:
        from launcher.providers import local_instances as li

        li.clear_local_tags(self._ledger(), instance_id, keys)

    def terminate_instance(self, region: str, instance_id: str) -> None:
        """Through `launcher down`: the run's controller stops the job and tears down."""
        from launcher.providers import local_instances as li

        if self._stop_cluster is None:
            raise ProviderError("this local provider was given no way to end runs (stop_cluster)")
        li.stop_local_cluster(self._ledger(), instance_id, self._stop_cluster)

    stop_instance = terminate_instance  # a local cluster has no stopped state

    # ---- simulated spot capacity --------------------------------------------------------------
    def _trace(self, zone: str | None) -> SpotTrace | None:
        """The trace a zone follows: its own with `zone_traces` (a zone not simulated: None), else the one."""
        return self.zone_traces.get(zone) if self.zone_traces else self.trace  # type: ignore[arg-type]

    def _trace_available(self, zone: str | None = None) -> bool:
        trace = self._trace(zone)
        return trace is None or trace.available_at(self._clock() - self._t0)

    def spot_available(self, offer: Offer, now=None) -> bool | None:
        """Whether simulated spot capacity exists right now (None: not a simulated spot offer).
        The trace is replayed on this provider's own clock (injected in tests), so `now` is
        accepted for the Provider interface and not used."""
        if offer.cloud != LOCAL_CLOUD or not offer.spot or not self.simulated_spot:
            return None
        if self.zone_traces and offer.zone not in self.zone_traces:
            return None
        return self._trace_available(offer.zone)

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        """A reason string once the (spot) cluster is due to be preempted, else None."""
        if handle.cluster not in self._attempt_index:
            return None  # on-demand, or not ours: never preempted
        zone = self._cluster_zone.get(handle.cluster)
        if not self._trace_available(zone):
            tick = self._trace(zone).tick_at(self._clock() - self._t0)
            return f"simulated trace: spot capacity gone{f' in zone {zone}' if zone else ''} at tick {tick}"
        if self.preemptions is None:
            return None
        idx = self._attempt_index.get(handle.cluster)
        delay = self.preemptions.delay_for(idx) if idx is not None else None
        if delay is not None and running_s >= delay:
            return f"simulated preemption #{idx + 1} after {delay:g}s"
        return None
