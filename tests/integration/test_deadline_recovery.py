"""The controller, the `deadline-aware` recovery policy and the local backend following a spot
trace, together: when spot capacity is gone the policy waits while the deadline allows (and the
controller asks again as soon as capacity is back), and switches to on-demand when the deadline
requires it. Time runs on an injected clock shared by the provider's trace, the controller and a
simulated job, so hours of trace pass in milliseconds and nothing depends on machine load."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from launcher.controller.controller import Controller, ControllerDeps, RunJob
from launcher.controller.recovery import recovery_policy
from launcher.executors.base import ExecRequest, ExecResult, Execution, Executor, Outcome, RankExit
from launcher.ledger import Ledger, RunRecord
from launcher.planning.budget import BudgetCheck
from launcher.planning.candidates import Candidate
from launcher.planning.plan import Plan
from launcher.providers.local import LocalProvider, SimulatedPrices, SpotTrace
from launcher.spec import load_spec_text
from pricing.models import ScoredOffer

# Run ids name cgroups and are matched in /proc: unique per test process, so two suites on
# one machine never meet.
RUN_DEADLINE = f"r-deadline-{os.getpid()}"

TICK_S = 600.0  # 10-minute trace ticks
# Spot for 30 minutes, gone for 50, then back for good (at 4800 s).
TRACE = SpotTrace(data=(0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0), gap_seconds=TICK_S)
BACK_AT_S = 8 * TICK_S
WORK_S = 3600.0  # the job needs one hour of running


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)


@dataclass
class SimulatedJob(Execution):
    """A job that checkpoints continuously: it progresses while it runs (each wait advances the
    clock a minute) and keeps its progress across attempts in `progress`."""

    clock: FakeClock
    progress: dict
    phase: str = "run"
    _result: ExecResult | None = None

    def poll(self) -> ExecResult | None:
        return self._result

    def wait(self, timeout_s: float | None = None) -> ExecResult | None:
        if self._result is None:
            step = min(60.0, WORK_S - self.progress["s"])
            self.clock.sleep(step)
            self.progress["s"] += step
            if self.progress["s"] >= WORK_S:
                self._result = ExecResult(Outcome.SUCCEEDED, 0, "run", (RankExit(0, "run", 0),))
        return self._result

    def stop(self, grace_s: float = 10.0) -> ExecResult:
        self._result = self._result or ExecResult(Outcome.CANCELLED, 143, "run", (RankExit(0, "run", 143),))
        return self._result

    def notify_preemption(self, grace_s: float = 10.0) -> None:
        self._result = self._result or ExecResult(Outcome.PREEMPTED, 75, "run", (RankExit(0, "run", 75),))

    @property
    def process_groups(self) -> tuple[int, ...]:
        return ()


@dataclass
class SimulatedExecutor(Executor):
    clock: FakeClock
    progress: dict
    name: str = "simulated"

    def start(self, request: ExecRequest, handle) -> SimulatedJob:
        return SimulatedJob(self.clock, self.progress)


def run_with_deadline(tmp_path, deadline: str):
    clock = FakeClock()
    local = LocalProvider(trace=TRACE, clock=clock, prices=SimulatedPrices(0.3, 1.2))
    spot, on_demand = local.offer(), local.offer(spot=False)
    assert spot.spot and spot.price_usd_per_hour == 0.3 and not on_demand.spot and on_demand.price_usd_per_hour == 1.2
    provisioned_at: list[tuple[bool, float]] = []  # (spot, trace seconds) of each provision that worked
    provision = local.provision

    def recording_provision(request):
        handle = provision(request)
        provisioned_at.append((request.offer.spot, clock() - 1000.0))
        return handle

    local.provision = recording_provision
    cands = (Candidate(ScoredOffer(spot, 1, 0.1, "trace", None, 1.0, 0.3), 0),
             Candidate(ScoredOffer(on_demand, 2, 0.0, "on-demand", None, 1.0, 1.2), 0))  # fmt: skip
    plan = Plan("t", 1, cands, False, False, WORK_S / 3600, BudgetCheck(1.2, None, "p", None, None))
    spec_text = f"run: python train.py\nlauncher: {{deadline: {deadline}, expected_hours: 1}}\n"
    loaded = load_spec_text(spec_text)
    led = Ledger()
    led.create_run(RunRecord(run_id=RUN_DEADLINE, name="t", spec_hash="h", spec_yaml=spec_text, project="p"))
    (tmp_path / "run").mkdir()
    job = RunJob(RUN_DEADLINE, tmp_path / "run", loaded.spec, plan, None, tmp_path / "ck", {"project": "p"})
    policy = recovery_policy(None, has_deadline=True)
    assert policy.name == "deadline-aware"
    progress = {"s": 0.0}
    deps = ControllerDeps(
        ledger=led, provider_for=lambda cloud: local, executor_for=lambda cloud: SimulatedExecutor(clock, progress),
        policy=policy, clock=clock, sleep=clock.sleep, poll_interval_s=15.0, heartbeat_interval_s=3600.0,
    )  # fmt: skip
    result = Controller(job, deps).run()
    return led, result, provisioned_at, clock


@pytest.fixture
def ledger_closer():
    opened = []
    yield opened.append
    for led in opened:
        led.close()


def waits(led) -> list[dict]:
    return [e.data for e in led.events(RUN_DEADLINE, kind="recovery") if e.data.get("decision") == "wait"]


def test_deadline_aware_waits_for_spot_and_resumes_the_moment_it_is_back(tmp_path, ledger_closer):
    led, result, provisioned_at, _ = run_with_deadline(tmp_path, "6h")
    ledger_closer(led)
    assert result.state == "succeeded"
    attempts = led.attempts(RUN_DEADLINE)
    assert [(a.spot, a.end_reason) for a in attempts] == [(True, "preempted"), (True, "completed")]
    assert [a.price_usd_per_hour for a in attempts] == [0.3, 0.3]
    # It waited (plenty of slack) ...
    w = waits(led)
    assert len(w) >= 2 and all(x["reason"].startswith("wait: slack above reserve") for x in w)
    # ... and was asked again when the trace's capacity came back, not at the end of a poll.
    assert provisioned_at == [(True, 0.0), (True, BACK_AT_S)]
    (placed,) = [e.data for e in led.events(RUN_DEADLINE, kind="recovery") if "offer" in e.data]
    assert placed["offer"]["spot"] is True and placed["reason"].startswith("spot: spot available")
    assert len(led.events(RUN_DEADLINE, kind="preemption")) == 1


def test_deadline_aware_switches_to_on_demand_when_the_deadline_requires(tmp_path, ledger_closer):
    led, result, provisioned_at, clock = run_with_deadline(tmp_path, "90m")
    ledger_closer(led)
    assert result.state == "succeeded"
    attempts = led.attempts(RUN_DEADLINE)
    assert [(a.spot, a.end_reason) for a in attempts] == [(True, "preempted"), (False, "completed")]
    assert [a.price_usd_per_hour for a in attempts] == [0.3, 1.2]
    # Half the work was done at the preemption (30 min), 60 min left: one poll of waiting fits
    # the reserve, the second does not, so it goes on-demand while spot is still gone.
    assert len(waits(led)) == 1
    (placed,) = [e.data for e in led.events(RUN_DEADLINE, kind="recovery") if "offer" in e.data]
    assert placed["offer"]["spot"] is False and placed["reason"].startswith("on-demand:")
    assert provisioned_at[1][0] is False and provisioned_at[1][1] < BACK_AT_S
    assert clock() - 1000.0 <= 90 * 60  # finished before the deadline
