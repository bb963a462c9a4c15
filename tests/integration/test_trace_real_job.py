"""The local backend following a spot trace with a real job (bash under the local executor, the
real controller and ledger): capacity goes, the job is noticed, saves and exits 75, provisioning
fails while the trace has no capacity, and the next placement resumes from the checkpoint.

The trace runs on a clock shared by the provider and the controller that moves on events, not
on wall time: capacity drops only once the job has printed that it is ready and has made
progress, and trace time passes only while the controller sleeps between provisioning tries.
So the order of events is the same on an idle machine and on a loaded one."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from launcher.controller.controller import Controller, ControllerDeps, RunJob
from launcher.controller.recovery import recovery_policy
from launcher.executors.local import LocalExecutor, log_path
from launcher.ledger import Ledger, RunRecord
from launcher.planning.budget import BudgetCheck
from launcher.planning.candidates import Candidate
from launcher.planning.plan import Plan
from launcher.providers.local import LocalProvider, SpotTrace
from launcher.spec import load_spec_text
from pricing.models import ScoredOffer

# Run ids name cgroups and are matched in /proc: unique per test process, so two suites on
# one machine never meet.
RUN_TRACE = f"r-trace-{os.getpid()}"
RUN_SCHED = f"r-sched-{os.getpid()}"

GAP_S = 60.0
# Capacity for the first minute, gone for two, then back for good.
TRACE = SpotTrace(data=(0, 1, 1, 0), gap_seconds=GAP_S)
DROP_AT_S, BACK_AT_S = 1 * GAP_S, 3 * GAP_S

# Counts to 40, checkpointing its counter on SIGTERM; a first attempt (starting at 0) counts to
# 3000 (a minute): long enough that it ends by the preemption this test causes, bounded so that
# a broken test fails instead of hanging.
JOB = """\
f=$LAUNCHER_CHECKPOINT_DIR/step; i=$(cat $f 2>/dev/null || echo 0)
limit=40; [ "$i" = 0 ] && limit=3000
trap 'echo $i > $f; exit 75' TERM
echo "attempt $LAUNCHER_ATTEMPT resumes at $i"
while [ $i -lt $limit ]; do i=$((i+1)); echo "step $i"; sleep 0.02; done
echo "done at $i"
"""


class EventClock:
    """Trace time: stands still while a job runs; jumps to the capacity drop once the first
    attempt's log shows the job ready and three steps done; advances by what the controller
    sleeps (its waits between provisioning tries)."""

    def __init__(self, run_dir: Path) -> None:
        self.t = 0.0
        self.run_dir = run_dir
        self.dropped = False

    def _first_attempt_ready(self) -> bool:
        log = log_path(self.run_dir, 0)
        text = log.read_text() if log.exists() else ""
        return "resumes at 0" in text and "step 3\n" in text

    def __call__(self) -> float:
        if not self.dropped and self._first_attempt_ready():
            self.dropped, self.t = True, DROP_AT_S
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)
        time.sleep(0.001)  # let the job's processes run


def test_real_job_is_preempted_by_the_trace_and_resumes_from_its_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "ck").mkdir()  # as the CLI makes it before the job starts
    clock = EventClock(run_dir)
    local = LocalProvider(trace=TRACE, clock=clock)
    spot = local.offer()
    assert spot.spot
    provisions: list[float] = []  # trace time of each provisioning try
    provision = local.provision

    def recording_provision(request):
        provisions.append(clock())
        return provision(request)

    local.provision = recording_provision
    plan = Plan("t", 1, (Candidate(ScoredOffer(spot, 1, 0.1, "trace", None, 1.0, 0.0), 0),), False, False, 0.01,
                BudgetCheck(0.0, None, "p", None, None))  # fmt: skip
    spec_text = "run: |\n" + "".join(f"  {line}\n" for line in JOB.splitlines())
    loaded = load_spec_text(spec_text)
    with Ledger() as led:
        led.create_run(RunRecord(run_id=RUN_TRACE, name="t", spec_hash="h", spec_yaml=spec_text, project="p"))
        job = RunJob(RUN_TRACE, run_dir, loaded.spec, plan, None, tmp_path / "ck", {"project": "p"}, grace_s=10.0)
        deps = ControllerDeps(
            ledger=led, provider_for=lambda cloud: local, executor_for=lambda cloud: LocalExecutor(podman=False),
            policy=recovery_policy(None), clock=clock, sleep=clock.sleep, poll_interval_s=0.05,
            heartbeat_interval_s=3600.0, capacity_retry_s=GAP_S / 2,
        )  # fmt: skip
        result = Controller(job, deps).run()
        attempts = led.attempts(RUN_TRACE)
        preemptions = led.events(RUN_TRACE, kind="preemption")

    assert result.state == "succeeded", result
    reasons = [a.end_reason for a in attempts]
    # Preempted at the drop (trace time 60), refused every 30 s while capacity is gone (60, 90,
    # 120, 150), placed again the moment it is back (180).
    assert reasons == ["preempted"] + ["provision_failed"] * 4 + ["completed"], reasons
    assert provisions == pytest.approx([0.0, 60.0, 90.0, 120.0, 150.0, 180.0])
    assert len(preemptions) == 1 and "capacity gone at tick 1" in str(preemptions[0].data)
    saved = int((tmp_path / "ck" / "step").read_text())
    assert saved >= 3  # the job had done at least the three steps that let capacity drop
    log = log_path(run_dir, 0).read_text()
    assert f"resumes at {saved}" in log and log.rstrip().endswith("done at 40")


class AttemptClock:
    """Time for a preemption schedule: stands still while a job runs, and jumps `step_s` each
    time the log (appended to by every attempt) shows one more attempt ready: its "resumes at"
    line followed by three steps."""

    def __init__(self, run_dir: Path, step_s: float) -> None:
        self.t, self.run_dir, self.step_s, self.seen = 0.0, run_dir, step_s, 0

    def __call__(self) -> float:
        log = log_path(self.run_dir, 0)
        text = log.read_text() if log.exists() else ""
        ready = sum(1 for part in text.split("resumes at ")[1:] if part.count("step ") >= 3)
        if ready > self.seen:
            self.seen, self.t = ready, self.t + self.step_s
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)
        time.sleep(0.001)


def test_real_job_preempted_on_schedule_resumes_twice_from_its_checkpoints(tmp_path):
    from launcher.providers.local import PreemptionSchedule

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "ck").mkdir()
    clock = AttemptClock(run_dir, step_s=10.0)
    local = LocalProvider(PreemptionSchedule((5.0, 5.0)), clock=clock)
    spot = local.offer()
    plan = Plan("t", 1, (Candidate(ScoredOffer(spot, 1, 0.1, "sched", None, 1.0, 0.0), 0),), False, False, 0.01,
                BudgetCheck(0.0, None, "p", None, None))  # fmt: skip
    # Attempts 1 and 2 run until noticed (bounded at 3000 steps); attempt 3 counts to 40.
    job_text = JOB.replace('limit=40; [ "$i" = 0 ] && limit=3000',
                           'limit=40; [ "$LAUNCHER_ATTEMPT" -lt 3 ] && limit=3000')
    assert job_text != JOB
    spec_text = "run: |\n" + "".join(f"  {line}\n" for line in job_text.splitlines())
    loaded = load_spec_text(spec_text)
    with Ledger() as led:
        led.create_run(RunRecord(run_id=RUN_SCHED, name="t", spec_hash="h", spec_yaml=spec_text, project="p"))
        job = RunJob(RUN_SCHED, run_dir, loaded.spec, plan, None, tmp_path / "ck", {"project": "p"}, grace_s=10.0)
        deps = ControllerDeps(
            ledger=led, provider_for=lambda cloud: local, executor_for=lambda cloud: LocalExecutor(podman=False),
            policy=recovery_policy(None), clock=clock, sleep=clock.sleep, poll_interval_s=0.05,
            heartbeat_interval_s=3600.0,
        )  # fmt: skip
        result = Controller(job, deps).run()
        attempts = led.attempts(RUN_SCHED)
        preemptions = led.events(RUN_SCHED, kind="preemption")

    assert result.state == "succeeded", result
    assert [(a.spot, a.end_reason) for a in attempts] == [(True, "preempted"), (True, "preempted"), (True, "completed")]
    assert len(preemptions) == 2 and clock.seen >= 2
    log = log_path(run_dir, 0).read_text()
    starts = [int(part.split()[0]) for part in log.split("resumes at ")[1:]]
    # each attempt resumed where the last one's checkpoint left it, at least three steps on
    assert len(starts) == 3 and starts[0] == 0 and starts[1] >= 3 and starts[2] >= starts[1] + 3, starts
    assert log.rstrip().endswith("done at 40")
