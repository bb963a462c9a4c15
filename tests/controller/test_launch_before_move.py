"""Make-before-break: on a cloud that cannot report spot capacity, a move to spot launches the spot
cluster before the running one is stopped, so a launch the cloud refuses costs the run nothing (its
on-demand cluster runs on) and a launch that succeeds is the next attempt's cluster. The simulator
replays the same rule (`simulate(capacity_signal=False)`), decision for decision and dollar for
dollar; before, a refused look from on-demand had already stopped on-demand and paid its restart."""

from __future__ import annotations

from tests.controller.test_placement_replay import GAP_S, BlindZones, check, trace


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
