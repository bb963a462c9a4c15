"""Proof that the live controller decides like `launcher simulate`: a spot trace per zone replayed
through the real `Controller` (ledger, state machine, attempt loop, notices, placement hook) on an
injected clock, time-compressed and event-driven (the clock moves only when the controller sleeps
or waits on its job: no wall-clock sleeps), gives the same decision at every tick and the same
cost as the simulator running the same policy on the same traces.

The doubles stand for the cloud and the job: capacity per zone follows the traces on the injected
clock (provisioning spot without capacity fails; a running spot cluster gets a notice when its
zone's capacity goes), and the job makes progress only in its `run` phase, after the restart
overhead, keeping its progress across attempts (a checkpoint at each notice), as the simulator does.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from launcher.controller.controller import Controller, ControllerDeps, RunJob
from launcher.controller.outage_watch import OUTAGE_EVENT
from launcher.controller.placement_history import read_history
from launcher.errors import ProviderError
from launcher.executors.base import ExecRequest, ExecResult, Execution, Executor, Outcome, RankExit
from launcher.ledger import Ledger, RunRecord
from launcher.ledger.records import NewAttempt
from launcher.planning.budget import BudgetCheck
from launcher.planning.candidates import Candidate
from launcher.planning.plan import Plan
from launcher.policies.base import Decision, DecisionState, PlacementPolicy
from launcher.policies.recovery import NextOfferPolicy
from launcher.policies.registry import get_placement_policy
from launcher.policies.zone_history import ZoneHistory
from launcher.providers.base import ClusterHandle, ClusterRequest, CredentialStatus, Node, Provider
from launcher.providers.local import LocalProvider, SimulatedPrices, SpotTrace
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.synthetic import generate
from launcher.simulation.synthetic_shifted import generate as generate_shifted
from launcher.simulation.traces import Trace
from launcher.spec import load_spec_text
from pricing.models import Offer, ScoredOffer

GAP_S = 300  # one trace tick: 5 minutes of simulated time
PROBE_MAX_TICKS = 4  # probes of a zone without capacity at most 4 ticks apart (the controller's 16 min is not a whole tick)
SPOT, OD = 1.0, 3.0


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def offer(zone: str, spot: bool) -> Offer:
    return Offer(cloud="fake", region="r", zone=zone, instance_type="g.xl", accelerator="T4", accelerator_count=1,
                 vcpus=4, memory_gib=16, gpu_memory_gib=16, spot=spot, price_usd_per_hour=SPOT if spot else OD,
                 on_demand_price_usd_per_hour=OD)  # fmt: skip


class ZoneCapacity(Provider):
    """Spot capacity per zone from the traces, read on the injected clock; bills what it hands out."""

    name = "fake"
    notice_poll_s = 0.0

    def __init__(self, traces: dict[str, Trace], clock: Clock) -> None:
        self.traces, self.clock = traces, clock
        self.held: dict[str, tuple[Offer, float]] = {}
        self.bills: list[tuple[Offer, float, float]] = []  # offer, from, to (clock seconds)

    def _up(self, zone: str) -> bool:
        tick = int(self.clock() // GAP_S + 1e-9)
        av = self.traces[zone].available
        return tick < len(av) and av[tick]

    def credentials(self) -> CredentialStatus:
        return CredentialStatus("fake", True, "test")

    def spot_available(self, o: Offer, now=None) -> bool | None:
        return self._up(o.zone) if o.spot else None

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        o = request.offer
        if o.spot and not self._up(o.zone):
            raise ProviderError(f"no spot capacity in {o.zone}")
        self.held[request.cluster] = (o, self.clock())
        return ClusterHandle(request.cluster, "fake", o.region, o.zone, (Node(f"i-{request.cluster}", "10.0.0.1", 0),))

    def terminate(self, handle: ClusterHandle) -> None:
        if handle.cluster in self.held:
            o, start = self.held.pop(handle.cluster)
            self.bills.append((o, start, self.clock()))

    def list_instances(self, tag_filter=None):
        return []

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        o, _ = self.held.get(handle.cluster, (None, 0.0))
        return f"capacity gone in {o.zone}" if o is not None and o.spot and not self._up(o.zone) else None

    def cost(self) -> float:
        return sum(o.price_usd_per_hour * (end - start) / 3600.0 for o, start, end in self.bills)


class BilledLocal(LocalProvider):
    """The real local backend as several zones of simulated spot capacity (one trace per zone, on
    the injected clock): its own refusals, notices and `spot_available`. Only the bill is kept
    here, on the injected clock (the ledger's attempt times are wall-clock)."""

    def __init__(self, traces: dict[str, Trace], clock: Clock) -> None:
        zone_traces = {z: SpotTrace(tuple(0 if up else 1 for up in t.available), float(GAP_S)) for z, t in traces.items()}
        super().__init__(zone_traces=zone_traces, clock=clock, prices=SimulatedPrices(SPOT, OD))
        self.clock = clock
        self.held: dict[str, tuple[Offer, float]] = {}
        self.bills: list[tuple[Offer, float, float]] = []

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        handle = super().provision(request)
        self.held[request.cluster] = (request.offer, self.clock())
        return handle

    def terminate(self, handle: ClusterHandle) -> None:
        super().terminate(handle)
        if handle.cluster in self.held:
            o, start = self.held.pop(handle.cluster)
            self.bills.append((o, start, self.clock()))

    cost = ZoneCapacity.cost


class BlindZones(ZoneCapacity):
    """The same zones on a cloud that cannot report spot capacity (as AWS and GCP cannot): a run
    learns it only from its own launches refused and its clusters preempted."""

    def spot_available(self, o: Offer, now=None) -> bool | None:
        return None


class Job:
    """The job's progress (seconds of work), kept across attempts like a checkpointed job's."""

    def __init__(self, total_s: float) -> None:
        self.total_s, self.done_s = total_s, 0.0


class TickExecution(Execution):
    def __init__(self, job: Job, clock: Clock, overhead_s: float) -> None:
        self.job, self.clock, self.start, self.overhead_s = job, clock, clock(), overhead_s
        self.notified = False
        self.result: ExecResult | None = None

    @property
    def phase(self) -> str:
        return "run" if self.clock() - self.start >= self.overhead_s - 1e-9 else "setup"

    def poll(self) -> ExecResult | None:
        return self.result

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        if self.result is None and self.notified:  # checkpoint on the notice, then exit 75
            self.result = ExecResult(Outcome.PREEMPTED, 75, "run", (RankExit(0, "run", 75),))
        if self.result is not None:
            return self.result
        c0 = self.clock()
        self.clock.sleep(timeout_s or GAP_S)
        ran = max(0.0, self.clock() - max(c0, self.start + self.overhead_s))
        self.job.done_s += ran
        if self.job.done_s >= self.job.total_s - 1e-6:
            self.result = ExecResult(Outcome.SUCCEEDED, 0, "run", (RankExit(0, "run", 0),))
        return self.result

    def stop(self, grace_s: float = 10.0) -> ExecResult:
        if self.result is None:
            self.result = ExecResult(Outcome.CANCELLED, 143, "run", (RankExit(0, "run", 143),))
        return self.result

    def notify_preemption(self, grace_s: float = 10.0) -> None:
        self.notified = True

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()


class TickExecutor(Executor):
    name = "tick"

    def __init__(self, job: Job, clock: Clock, overhead_s: float) -> None:
        self.job, self.clock, self.overhead_s = job, clock, overhead_s

    def start(self, request: ExecRequest, handle: ClusterHandle) -> TickExecution:
        return TickExecution(self.job, self.clock, self.overhead_s)


class Recording(PlacementPolicy):
    """The named policy, with every decision it makes kept (for the simulator's side)."""

    def __init__(self, name: str, history: dict[int, ZoneHistory] | None = None) -> None:
        self.inner = get_placement_policy(name)
        self.name, self.multi_zone = self.inner.name, self.inner.multi_zone
        self.history = history or {}  # seeded after each reset, as the controller seeds its ledger's
        self.log: list[Decision] = []

    def reset(self) -> None:
        self.inner.reset()
        for z, h in self.history.items():
            self.inner.seed_history(z, h)
        self.log = []

    def decide(self, state: DecisionState) -> Decision:
        d = self.inner.decide(state)
        self.log.append(d)
        return d


def replay(policy: str, traces: tuple[Trace, ...], *, work_ticks: int, deadline_ticks: int, overhead_ticks: int,
           tmp_path, backend: str = "double", provider_cls: type[ZoneCapacity] | None = None,
           earlier: Callable[[Ledger], None] | None = None,
           ) -> tuple[list[Decision], float, Ledger, str]:  # fmt: skip
    """`earlier`: writes other runs' evidence into the ledger first; the controller then reads the
    zones' history (else it reads none, as the simulator knows no earlier runs)."""
    zones = {f"z{i}": t for i, t in enumerate(traces)}
    clock = Clock()
    provider: ZoneCapacity | BilledLocal
    if backend == "local":
        provider = BilledLocal(zones, clock)
        ranked = [*provider.offers(), provider.offer(spot=False)]
    else:
        provider = (provider_cls or (BlindZones if backend == "blind" else ZoneCapacity))(zones, clock)
        ranked = [offer(z, True) for z in zones] + [offer("z0", False)]
    cands = tuple(Candidate(ScoredOffer(o, i + 1, 0.01, "<5%", None, 1.0, o.price_usd_per_hour), 0)
                  for i, o in enumerate(ranked))  # fmt: skip
    work_h, deadline_h, overhead_h = (n * GAP_S / 3600.0 for n in (work_ticks, deadline_ticks, overhead_ticks))
    plan = Plan("replay", 1, cands, False, True, work_h, BudgetCheck(0.0, None, "p", None, None))
    spec_text = f"run: python train.py\nlauncher: {{deadline: {deadline_ticks * GAP_S}s}}\n"
    loaded = load_spec_text(spec_text)
    led = Ledger()
    if earlier is not None:
        earlier(led)
    run_id = f"r-replay-{tmp_path.name}"
    # The controller's clock is the run's age when it starts (wall clock, from the ledger) plus the
    # injected clock; the simulator's starts at 0. A created_at just ahead of now makes that age 0
    # (it is clamped), so milliseconds spent before the controller starts do not shift its spells.
    created = datetime.now(UTC) + timedelta(minutes=10)
    led.create_run(RunRecord(run_id=run_id, name="replay", spec_hash="h", spec_yaml=spec_text, project="p",
                             created_at=created))  # fmt: skip
    (tmp_path / run_id).mkdir(parents=True)
    job = RunJob(run_id, tmp_path / run_id, loaded.spec, plan, None, tmp_path / run_id / "ck", {"project": "p"}, grace_s=0.1)
    executor = TickExecutor(Job(work_ticks * GAP_S), clock, overhead_ticks * GAP_S)
    deps = ControllerDeps(
        ledger=led, provider_for=lambda cloud: provider, executor_for=lambda cloud: executor,
        policy=NextOfferPolicy(), clock=clock, sleep=clock.sleep, poll_interval_s=GAP_S, heartbeat_interval_s=3600.0,
        budget_stop=lambda led, run_id: None, restart_overhead_hours=overhead_h, max_recoveries=10_000,
        placement_policy=get_placement_policy(policy), placement_tick_s=GAP_S, placement_gap_hours=GAP_S / 3600.0,
        checkpoint_poll_s=3600.0, max_wait_s=10 * deadline_ticks * GAP_S,
        placement_history_days=7.0 if earlier else 0.0,
        capacity_retry_s=GAP_S, max_probe_s=PROBE_MAX_TICKS * GAP_S,  # a refused probe holds nothing for a tick
    )  # fmt: skip
    controller = Controller(job, deps)
    result = controller.run()
    assert result.state == "succeeded", result
    return controller._placement.log, provider.cost(), led, run_id


def sim(policy: str, traces, *, work_ticks, deadline_ticks, overhead_ticks, capacity_signal: bool = True,
        history: dict[int, ZoneHistory] | None = None):  # fmt: skip
    rec = Recording(policy, history)
    g = GAP_S / 3600.0
    case = SimCase(traces, 0, work_ticks * g, deadline_ticks * g, overhead_ticks * g, OD, SPOT)
    r = simulate(rec, case, capacity_signal=capacity_signal, max_probe_hours=PROBE_MAX_TICKS * g)
    assert r.finished
    return rec.log, r.cost, r


def trace(pattern: str, name: str) -> Trace:
    return Trace(name=name, gap_seconds=float(GAP_S), available=tuple(c == "0" for c in pattern))


def decisions(log: list[Decision]) -> list[tuple[str, int, str]]:
    return [(d.choice.value, d.zone if d.choice.value == "spot" else 0, d.reason) for d in log]


def check(policy, traces, tmp_path, backend="double", provider_cls=None, **job):
    ctl_log, ctl_cost, led, run_id = replay(policy, traces, tmp_path=tmp_path, backend=backend, provider_cls=provider_cls, **job)
    sim_log, sim_cost, result = sim(policy, traces, capacity_signal=backend != "blind", **job)
    assert decisions(ctl_log) == decisions(sim_log)
    assert ctl_cost == pytest.approx(sim_cost, abs=1e-9)
    if backend == "blind":  # the probes the simulator counted are the launches the cloud refused
        refused = [a for a in led.attempts(run_id) if a.end_reason == "provision_failed"]
        assert len(refused) == result.refused
    return led, run_id


def test_hand_made_trace_waits_goes_on_demand_and_moves_back_to_spot(tmp_path, capsys):
    # 12 ticks without spot, then spot for good: wait, on-demand at the reserve, back to spot.
    traces = (trace("1" * 12 + "0" * 40, "z0"),)
    led, run_id = check("deadline-aware", traces, tmp_path, work_ticks=12, deadline_ticks=24, overhead_ticks=1)
    attempts = led.attempts(run_id)
    assert [(a.spot, a.end_reason) for a in attempts] == [(False, "moved"), (True, "completed")]
    events = [e.data for e in led.events(run_id, kind="placement")]
    assert events[0]["decision"] == "none" and "wait for spot" in events[0]["reason"]
    assert any(e["decision"] == "on-demand" for e in events)
    moved = [e for e in events if e["decision"] == "spot" and e["held"] == "on-demand"]
    assert moved and "leave on-demand" in moved[0]["reason"] and "slack_hours" in moved[0]
    # `launcher runs show` lists them: why it waited, why it moved, the slack left.
    from launcher.cli.main import run

    led.close()
    assert run(["runs", "show", run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    placements = [e["data"] for e in shown["events"] if e["kind"] == "placement"]
    assert placements == events
    assert run(["runs", "show", run_id]) == 0
    table = capsys.readouterr().out
    assert "placement" in table and "decision=spot, slack_hours=" in table and "wait for spot" in table


@pytest.mark.parametrize("policy", ["deadline-aware", "greedy", "uniform-progress", "expected-cost", "markov-dp"])
@pytest.mark.parametrize("regime,seed", [("flapping", 1), ("long-outages", 2), ("scarce", 3)])
def test_synthetic_traces_single_zone_tick_for_tick(policy, regime, seed, tmp_path):
    traces = generate(regime, zones=1, hours=30, seed=seed, gap_seconds=GAP_S)
    check(policy, traces, tmp_path, work_ticks=96, deadline_ticks=180, overhead_ticks=2)


@pytest.mark.parametrize("policy", ["multi-zone", "expected-cost-multi-zone", "markov-dp-multi-zone"])
@pytest.mark.parametrize("regime,seed", [("independent", 4), ("daily-correlated", 5), ("flapping", 6)])
def test_synthetic_traces_multi_zone_tick_for_tick(policy, regime, seed, tmp_path):
    traces = generate(regime, zones=3, hours=40, seed=seed, gap_seconds=GAP_S)
    check(policy, traces, tmp_path, work_ticks=120, deadline_ticks=200, overhead_ticks=2)


@pytest.mark.parametrize("policy", ["expected-cost", "expected-cost-multi-zone"])
@pytest.mark.parametrize("regime,seed", [("daily-weekly", 1), ("regime-shift", 2), ("heavy-tail", 3)])
def test_judging_generator_traces_tick_for_tick(policy, regime, seed, tmp_path):
    # The second generator's regimes (a daily cycle, a shift mid-job, Pareto outages) at the
    # replay's tick: the model-based policies decide alike there too, reasons included.
    traces = tuple(Trace(t.name, float(GAP_S), t.available) for t in generate_shifted(regime, zones=3, hours=40, seed=seed))
    check(policy, traces, tmp_path, work_ticks=120, deadline_ticks=220, overhead_ticks=2)


@pytest.mark.parametrize("regime,seed", [("daily-weekly", 1), ("regime-shift", 2), ("heavy-tail", 3)])
def test_markov_dp_on_judging_generator_traces_tick_for_tick(regime, seed, tmp_path):
    # `markov-dp` plans on one zone's model; its tables are solved in chunks at decision instants,
    # so the controller must ask at the same instants as the simulator for the same decisions.
    traces = tuple(Trace(t.name, float(GAP_S), t.available) for t in generate_shifted(regime, zones=1, hours=40, seed=seed))
    check("markov-dp", traces, tmp_path, work_ticks=120, deadline_ticks=220, overhead_ticks=2)


@pytest.mark.parametrize("regime,seed", [("daily-weekly", 1), ("regime-shift", 2), ("zones-fail-together", 4)])
def test_markov_dp_multi_zone_on_judging_generator_traces_tick_for_tick(regime, seed, tmp_path):
    # One table per zone, one zone's chunk per decision instant, moves between zones: the
    # controller still asks at the simulator's instants and gets the same decisions and reasons.
    traces = tuple(Trace(t.name, float(GAP_S), t.available) for t in generate_shifted(regime, zones=3, hours=40, seed=seed))
    check("markov-dp-multi-zone", traces, tmp_path, work_ticks=120, deadline_ticks=220, overhead_ticks=2)


@pytest.mark.parametrize("regime,seed", [("scarce", 3), ("scarce", 8)])
def test_multi_zone_on_the_local_backend_tick_for_tick(regime, seed, tmp_path):
    # The same replay with the real local backend as the zones (`--simulate-trace` per zone): its
    # refusals, notices and capacity answers drive the controller, not the test's double.
    traces = generate(regime, zones=3, hours=40, seed=seed, gap_seconds=GAP_S)
    led, run_id = check("multi-zone", traces, tmp_path, backend="local", work_ticks=120, deadline_ticks=200, overhead_ticks=2)
    zones = {a.zone for a in led.attempts(run_id) if a.spot}
    assert zones <= {"z0", "z1", "z2"} and len(zones) >= 2  # it did move between the local zones


def test_random_hand_traces_tick_for_tick(tmp_path):
    rng = random.Random(7)
    for i in range(4):
        pats = tuple("".join(rng.choice("0001") for _ in range(80)) for _ in range(2))
        traces = tuple(trace(p, f"z{j}") for j, p in enumerate(pats))
        check("multi-zone", traces, tmp_path / str(i), work_ticks=30, deadline_ticks=60, overhead_ticks=1)


@pytest.mark.parametrize("policy", ["deadline-aware", "greedy", "markov-dp", "multi-zone", "markov-dp-multi-zone"])
@pytest.mark.parametrize("regime,seed", [("flapping", 1), ("scarce", 3)])
def test_without_a_capacity_signal_tick_for_tick(policy, regime, seed, tmp_path):
    # A cloud that cannot say where spot capacity is: the controller shows the policy what the run
    # saw (running, refused, preempted) and probes zones without capacity at growing intervals;
    # `simulate(capacity_signal=False)` does the same, decision for decision, refusal for refusal.
    zones = 3 if policy.endswith("multi-zone") else 1
    traces = generate(regime, zones=zones, hours=40, seed=seed, gap_seconds=GAP_S)
    led, run_id = check(policy, traces, tmp_path, backend="blind", work_ticks=120, deadline_ticks=220, overhead_ticks=2)
    assert sum(a.end_reason == "provision_failed" for a in led.attempts(run_id)) >= 10  # it probed, and was refused



def week_of_outages(led: Ledger) -> None:
    """Another run's evidence in zone z0 yesterday: spot spells of 20 and 40 min ended by the cloud,
    outages of 6 h and 10 h seen to end and one of 12 h the run outlasted."""
    led.create_run(RunRecord(run_id="r-earlier", name="earlier", spec_hash="h", spec_yaml="run: x", project="p"))
    day = datetime.now(UTC) - timedelta(days=1)
    for minutes in (20, 40):
        a = led.add_attempt("r-earlier", NewAttempt.from_offer(offer("z0", True)), started_at=day)
        led.end_attempt(a.attempt_id, "preempted", ended_at=day + timedelta(minutes=minutes))
    o = offer("z0", True)
    for hours, ended in ((6.0, True), (10.0, True), (12.0, False)):
        led.add_event("r-earlier", OUTAGE_EVENT, {"cloud": o.cloud, "region": o.region, "zone": o.zone,
                                                  "instance_type": o.instance_type, "down_hours": hours, "ended": ended})  # fmt: skip


@pytest.mark.parametrize("policy", ["deadline-aware", "markov-dp"])
def test_a_zone_s_history_from_the_ledger_decides_as_in_the_simulator(policy, tmp_path):
    # The controller reads other runs' attempts and outages in the zone and seeds the policy; the
    # simulator seeded with the same history decides the same, tick for tick, and the history
    # changes what is decided (a zone whose outages last half a day is not one to wait for).
    traces = (trace("1" * 30 + "0" * 6 + "1" * 10 + "0" * 200, "z0"),)
    job = dict(work_ticks=60, deadline_ticks=120, overhead_ticks=2)
    ctl_log, ctl_cost, led, run_id = replay(policy, traces, tmp_path=tmp_path, earlier=week_of_outages, **job)
    (h,) = read_history(led, [offer("z0", True)], run_id=run_id, days=7)[0].values()
    assert (h.preemptions, h.recoveries) == (2, 2) and h.down_hours == pytest.approx(28.0)
    sim_log, sim_cost, _ = sim(policy, traces, history={0: h}, **job)
    assert decisions(ctl_log) == decisions(sim_log)
    assert ctl_cost == pytest.approx(sim_cost, abs=1e-9)
    plain_log, plain_cost, _ = sim(policy, traces, **job)
    assert decisions(plain_log) != decisions(sim_log)
    assert [e.data["zones"][0]["recoveries"] for e in led.events(run_id, kind="placement_history")] == [2]
