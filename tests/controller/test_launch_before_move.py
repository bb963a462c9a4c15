"""Make-before-break: on a cloud that cannot report spot capacity, a move to spot launches the spot
cluster before the running one is stopped, so a launch the cloud refuses costs the run nothing (its
on-demand cluster runs on) and a launch that succeeds is the next attempt's cluster. The simulator
replays the same rule (`simulate(capacity_signal=False)`), decision for decision and dollar for
dollar; before, a refused look from on-demand had already stopped on-demand and paid its restart."""

from __future__ import annotations

import threading
import time

from launcher.controller import attempt
from tests.controller.test_placement_replay import GAP_S, BlindZones, check, replay, trace


class Ordered(BlindZones):
    """The blind zones, with every launch and termination in the order the controller made them."""

    calls: list[tuple[str, str, bool, float]] = []

    def provision(self, request):
        try:
            return super().provision(request)
        finally:
            Ordered.calls.append(("provision", request.cluster, request.offer.spot, self.clock()))

    def terminate(self, handle):
        spot = handle.cluster in self.held and self.held[handle.cluster][0].spot
        Ordered.calls.append(("terminate", handle.cluster, spot, self.clock()))
        super().terminate(handle)


def test_a_refused_look_leaves_on_demand_running_and_a_granted_one_is_launched_first(tmp_path):
    # Spot for 30 min, a 5 h outage, then spot for good: on-demand through the outage, probing.
    Ordered.calls = []
    traces = (trace("0" * 6 + "1" * 60 + "0" * 120, "z0"),)
    led, run_id = check("deadline-aware", traces, tmp_path, backend="blind", provider_cls=Ordered,
                        work_ticks=90, deadline_ticks=130, overhead_ticks=1)  # fmt: skip
    attempts = led.attempts(run_id)
    on_demand = [a for a in attempts if not a.spot and a.end_reason != "provision_failed"]
    assert len(on_demand) == 1, [(a.spot, a.end_reason) for a in attempts]  # never restarted for a probe
    od = on_demand[0]
    looks = [a for a in attempts if a.spot and a.end_reason == "provision_failed" and a.seq > od.seq]
    assert len(looks) >= 3  # it looked while on-demand ran, and was refused
    assert all(od.started_at <= a.started_at <= od.ended_at for a in looks)
    # The move back: the spot cluster was launched (and granted) before on-demand was terminated.
    od_cluster = od.cluster
    end_od = next(i for i, c in enumerate(Ordered.calls) if c[0] == "terminate" and c[1] == od_cluster)
    granted = [i for i, c in enumerate(Ordered.calls) if c[0] == "provision" and c[2] and i < end_od]
    moved_to = attempts[attempts.index(od) + len(looks) + 1]
    assert moved_to.spot and moved_to.end_reason in (None, "completed"), moved_to
    assert any(Ordered.calls[i][1] == moved_to.cluster for i in granted)
    assert Ordered.calls[end_od][3] >= 6 * GAP_S + 60 * GAP_S  # not before capacity came back


class SlowLooks(BlindZones):
    """Blind zones whose spot launches made while another cluster runs take a while to answer:
    `answer_ticks` of the run's clock (which moves only while the controller watches the job),
    or, once that clock has stood still for `still_s` of real time (the controller is waiting for
    this answer; long enough that a loaded machine's slow pass is not taken for that), at once.
    Capacity is read when the launch answers.

    The run's clock is moved by the controller's sleeps while the look answers on a thread of its
    own, so how far the clock had moved when a look was asked or answered would otherwise depend on
    how the machine scheduled the two threads. The clock here waits for them instead (`_sleep`): it
    does not pass a look's answer time until that look has answered, nor move while a look thread
    just started has not yet asked, so the run's clock shows the same on a loaded machine."""

    answer_ticks = 5
    still_s = 2.0
    looks: list[tuple[float, float, bool]] = []  # the run's clock when asked and when answered, granted

    def __init__(self, traces, clock) -> None:
        super().__init__(traces, clock)
        self._lock = threading.Lock()
        self._older = set(threading.enumerate())  # threads of earlier runs are not this run's looks
        self._asked: set[threading.Thread] = set()
        self._due: dict[threading.Thread, float] = {}  # a look's thread -> the run's clock when it answers
        clock.sleep = self._sleep

    def _sleep(self, s: float) -> None:
        target, bound = self.clock.t + s, time.monotonic() + 30.0
        while True:
            with self._lock:
                # `AttemptRunner._look` names its threads look-<cluster>
                unasked = [t for t in threading.enumerate() if t.name.startswith("look-") and t.is_alive()
                           and t not in self._older and t not in self._asked]  # fmt: skip
                due = [d for d in self._due.values() if d <= target]
            if not unasked and not due:
                break
            if due:
                self.clock.t = max(self.clock.t, min(due))  # the look sees its time come, and answers
            assert time.monotonic() < bound, "a look was neither asked nor answered within 30 s"
            time.sleep(0.0002)
        self.clock.t = target

    def is_look(self, request) -> bool:
        """A spot launch while an on-demand cluster runs."""
        return request.offer.spot and any(not o.spot for o, _ in self.held.values())

    def provision(self, request):
        me = threading.current_thread()
        look = self.is_look(request)
        asked = self.clock()
        with self._lock:
            self._asked.add(me)
            if look:
                self._due[me] = asked + self.answer_ticks * GAP_S
        if not look:
            return super().provision(request)
        try:
            last, still_since = asked, time.monotonic()
            while self.clock() < asked + self.answer_ticks * GAP_S - 1e-9:
                if self.clock() != last:
                    last, still_since = self.clock(), time.monotonic()
                elif time.monotonic() - still_since > self.still_s:
                    break
                time.sleep(0.0005)
            try:
                handle = super().provision(request)
            except Exception:
                SlowLooks.looks.append((asked, self.clock(), False))
                raise
            SlowLooks.looks.append((asked, self.clock(), True))
            return handle
        finally:
            with self._lock:
                self._due.pop(me, None)


def test_a_look_the_cloud_is_slow_to_answer_does_not_hold_the_watch(tmp_path, monkeypatch):
    # A cloud's launch takes minutes: meanwhile the job runs on and is watched (its progress, its
    # end, stop requests, notices); the move is made when the launch answers.
    monkeypatch.setattr(attempt, "LOOK_INLINE_S", 0.0)  # the answer is never waited for in the pass that asked
    SlowLooks.looks, SlowLooks.answer_ticks = [], 5
    traces = (trace("0" * 6 + "1" * 60 + "0" * 120, "z0"),)
    _, _, led, run_id = replay("deadline-aware", traces, tmp_path=tmp_path, backend="blind", provider_cls=SlowLooks,
                         work_ticks=90, deadline_ticks=130, overhead_ticks=1)  # fmt: skip
    assert len(SlowLooks.looks) >= 3
    assert all(answered >= asked + 5 * GAP_S - 1e-6 for asked, answered, _ in SlowLooks.looks), SlowLooks.looks
    assert [granted for *_, granted in SlowLooks.looks][-1] and not any(g for *_, g in SlowLooks.looks[:-1])
    attempts = led.attempts(run_id)
    on_demand = [a for a in attempts if not a.spot]
    assert [a.end_reason for a in on_demand] == ["moved"]  # never restarted for a look
    assert attempts[-1].spot and attempts[-1].end_reason == "completed"
    assert not [a for a in attempts if a.is_open]
    # The spot cluster cost from its launch: its restart overhead (the cost report's waste) counts
    # the launch's 5 ticks and the move, not only the job's setup after the move.
    (again,) = [e for e in led.events(run_id, kind="recovery") if e.attempt_id == attempts[-1].attempt_id]
    asked, answered, _ = SlowLooks.looks[-1]
    assert again.data["restart_overhead_seconds"] >= answered - asked >= 5 * GAP_S - 1e-6


def test_a_look_thread_the_machine_schedules_late_changes_nothing_the_run_sees(tmp_path, monkeypatch):
    # The fake cloud above is what the slow-look tests stand on: on a loaded machine a look's
    # thread may start or wake late, and the run's clock must not run ahead of it meanwhile.
    monkeypatch.setattr(attempt, "LOOK_INLINE_S", 0.0)
    real_sleep = time.sleep

    class Late(SlowLooks):
        def provision(self, request):
            if self.is_look(request):
                real_sleep(0.05)  # this thread gets the CPU 50 ms late
            return super().provision(request)

    seen = []
    traces = (trace("0" * 6 + "1" * 60 + "0" * 120, "z0"),)
    for name, cls in (("on-time", SlowLooks), ("late", Late)):
        SlowLooks.looks, SlowLooks.answer_ticks = [], 5
        replay("deadline-aware", traces, tmp_path=tmp_path / name, backend="blind", provider_cls=cls,
               work_ticks=90, deadline_ticks=130, overhead_ticks=1)  # fmt: skip
        seen.append(list(SlowLooks.looks))
    assert len(seen[0]) >= 3 and seen[1] == seen[0], seen


def test_a_job_that_ends_while_a_look_is_out_has_the_launched_cluster_torn_down(tmp_path, monkeypatch):
    # The look answers only after the job has finished on on-demand: the cluster it launched is
    # not left running.
    monkeypatch.setattr(attempt, "LOOK_INLINE_S", 0.0)
    SlowLooks.looks, SlowLooks.answer_ticks = [], 10_000
    traces = (trace("0" * 6 + "1" * 60 + "0" * 120, "z0"),)
    _, _, led, run_id = replay("deadline-aware", traces, tmp_path=tmp_path, backend="blind", provider_cls=SlowLooks,
                         work_ticks=90, deadline_ticks=130, overhead_ticks=1)  # fmt: skip
    assert len(SlowLooks.looks) == 1
    asked, answered, granted = SlowLooks.looks[0]
    assert granted and answered > asked + 20 * GAP_S  # capacity was back by the time it answered
    attempts = led.attempts(run_id)
    look = next(a for a in attempts if a.spot and a.started_at >= next(o for o in attempts if not o.spot).started_at)
    assert look.end_reason == "cancelled"
    assert led.get_cluster(look.cluster).state == "terminated"
    assert [a.end_reason for a in attempts if not a.spot] == ["completed"]
    assert not [a for a in attempts if a.is_open]


def test_a_stop_asked_for_while_a_look_is_out_is_acted_on_before_it_answers(tmp_path, monkeypatch):
    # `launcher stop` (here the controller's cancel) during a launch of minutes stops the job at
    # once; the launch's answer is read after, and what it made is torn down.
    from launcher.controller.controller import Controller
    from tests.controller.test_placement_replay import TickExecution

    monkeypatch.setattr(attempt, "LOOK_INLINE_S", 0.0)
    order: list[str] = []
    controllers: list[Controller] = []
    real_run, real_stop = Controller.run, TickExecution.stop

    def run(self):
        controllers.append(self)
        return real_run(self)

    def stop(self, grace_s=10.0):
        order.append("job stopped")
        return real_stop(self, grace_s)

    class CancelledInALook(SlowLooks):
        def provision(self, request):
            look = self.is_look(request)
            if look:
                controllers[0].request_cancel()  # as `launcher stop` does, from another thread
            try:
                return super().provision(request)
            finally:
                if look:
                    order.append("look answered")

    monkeypatch.setattr(Controller, "run", run)
    monkeypatch.setattr(TickExecution, "stop", stop)
    SlowLooks.looks, SlowLooks.answer_ticks = [], 10_000
    traces = (trace("0" * 6 + "1" * 60 + "0" * 120, "z0"),)
    try:
        replay("deadline-aware", traces, tmp_path=tmp_path, backend="blind", provider_cls=CancelledInALook,
               work_ticks=90, deadline_ticks=130, overhead_ticks=1)  # fmt: skip
        raise AssertionError("the run was not stopped")
    except AssertionError as e:  # `replay` asserts success: the run ended otherwise
        assert "cancelled" in str(e) or "stopped" in str(e), e
    assert order[:2] == ["job stopped", "look answered"], order
    led = controllers[0].led
    run_id = controllers[0].job.run_id
    attempts = led.attempts(run_id)
    assert not [a for a in attempts if a.is_open]
    assert all(c.state == "terminated" for c in led.clusters(run_id=run_id))


class Killed(BaseException):
    """The controller process dies here (as under `kill -9`: nothing after this line runs)."""


def test_a_controller_killed_while_it_launches_before_a_move_is_repaired_by_the_next(ledger, tmp_path, monkeypatch):
    # On on-demand through an outage, the controller dies in the middle of a launch that looks at
    # spot: two open attempts (the running on-demand job and the look) and two clusters. The next
    # controller closes both, terminates both, and takes the run to its end.
    from tests.controller import test_no_capacity_signal as outage

    class DiesInALook(outage.OutageCloud):
        def provision(self, request):
            on_demand_up = any(not r.offer.spot for r in self.provisioned) and not any(
                c == r.cluster for r in self.provisioned if not r.offer.spot for c in self.terminated)
            if request.offer.spot and on_demand_up and self._out() and not getattr(self, "died", False):
                self.died = True
                self.provisioned.append(request)
                raise Killed
            return super().provision(request)

    real = outage.OutageCloud
    monkeypatch.setattr(outage, "OutageCloud", DiesInALook)
    monkeypatch.setattr(outage, "DEADLINE_H", 5.0)  # 1 h of slack for a 2 h outage: on-demand, looking
    try:
        outage.run(ledger, tmp_path, "deadline-aware")
        raise AssertionError(f"the controller was not killed in a look: {[(a.spot, a.end_reason) for a in ledger.attempts('r1')]}")
    except Killed:
        pass
    monkeypatch.setattr(outage, "OutageCloud", real)
    attempts = ledger.attempts("r1")
    open_ = [a for a in attempts if a.is_open]
    assert [(a.spot, a.cluster) for a in open_] == [(False, open_[0].cluster), (True, open_[1].cluster)]
    # The next controller (a resume) repairs it and finishes the run.
    result, cloud, clock = outage.run(ledger, tmp_path, "deadline-aware", resume=True)
    assert result.state == "succeeded"
    assert not [a for a in ledger.attempts("r1") if a.is_open]
    by_name = {a.cluster: a for a in ledger.attempts("r1")}
    assert {by_name[a.cluster].end_reason for a in open_} == {"abandoned"}
    assert all(c.state == "terminated" for c in ledger.clusters(run_id="r1") if c.name in {a.cluster for a in open_})


def test_a_job_that_finished_while_its_controller_died_in_a_look_ends_the_run(tmp_path):
    # The job finished on its own while the controller, dead, was launching spot for a move: the
    # look is the last attempt in the ledger, but the run's end is the job's (completed), not a reason
    # to start the job again.
    from launcher.controller.controller import Controller
    from launcher.ledger import Ledger
    from launcher.ledger.records import ClusterRecord, ClusterState, EventKind, NewAttempt
    from tests.controller.conftest import make_deps
    from tests.controller.doubles import ScriptedExecution, ScriptedProvider, offer
    from tests.controller.test_sky_cluster_cleanup import (
        DiesWhileWatched, Outcome, SkyLikeExecutor, _killed_mid_job, sky_cluster_name_of)  # fmt: skip

    executor = SkyLikeExecutor([lambda: DiesWhileWatched(None), lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        job, c = _killed_mid_job(led, tmp_path, executor)
        spot = offer("team-b", 1.0, spot=True)
        look = led.add_attempt(job.run_id, NewAttempt.from_offer(spot, num_nodes=1, cluster=f"{job.run_id}-c2"))
        led.add_event(job.run_id, EventKind.LOOK, {"offer": {"zone": spot.zone}}, attempt_id=look.attempt_id)
        led.upsert_cluster(ClusterRecord(name=f"{job.run_id}-c2", provider="fake", region=spot.region, zone=spot.zone,
                                         state=ClusterState.PROVISIONING, run_id=job.run_id, project="p"))  # fmt: skip
        executor.sky.clusters[sky_cluster_name_of(c.name)] = "SUCCEEDED"  # the job ended on its own

        result = Controller(job, make_deps(led, ScriptedProvider(), executor)).run()

        assert (result.state, result.end_reason) == ("succeeded", "completed")
        assert len(executor.started) == 1, "adopted, not started over"
        first, second = led.attempts(job.run_id)
        assert (first.end_reason, second.end_reason) == ("completed", "abandoned")
        assert led.get_cluster(f"{job.run_id}-c2").state == "terminated"
