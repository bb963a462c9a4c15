"""The tick simulator. Semantics (chosen so results compare with the literature):

- time advances in ticks of the trace's gap; each tick the policy chooses spot, on-demand or none,
  and may choose spot only in a zone whose tick is available;
- a spot cluster is preempted at the start of a tick that is unavailable (that tick is not billed);
- every start of a cluster (from none, after a preemption, on switching spot <-> on-demand or
  between zones) costs `round(overhead_hours / gap_hours)` ticks billed with no progress;
- cost = sum over ticks of the price of the cluster held; progress is kept across preemptions
  (the restart overhead models the work lost since the last checkpoint);
- work = ceil(work_hours / gap_hours) ticks; the deadline is met when the work completes within
  floor(deadline_hours / gap_hours) ticks.

The run goes on past the deadline (a late finish is still a finish) until the work is done or a cap
of deadline + work + 2 restarts ticks; ticks past the end of a trace have no spot capacity.

With `capacity_signal=False` the policy is shown what a run on a cloud that cannot report spot
capacity (AWS, GCP) sees, as the controller shows it (`policies/capacity_probes.py`): its spot
zone up while the cluster runs; down after a preemption or a refused start until a probe (one tick,
then twice as late after each miss, at most `max_probe_hours`); at a probe, and in a zone not tried
or left, available but not seen. A start refused there (the trace has no capacity) is counted in
`refused` and changes nothing else: a run holding a cluster launches the new one before it stops the
old (make-before-break, as the controller does), so a refusal leaves what was held running for the
tick; a run holding nothing holds nothing for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from launcher.policies.base import Choice, DecisionState, PlacementPolicy
from launcher.policies.capacity_probes import ProbedCapacity
from launcher.policies.zone_history import history_of_ticks
from launcher.simulation.traces import Trace

_EPS = 1e-9


def work_ticks(work_hours: float, gap_hours: float) -> int:
    return max(0, math.ceil(work_hours / gap_hours - _EPS))


def deadline_ticks(deadline_hours: float, gap_hours: float) -> int:
    return max(0, math.floor(deadline_hours / gap_hours + _EPS))


def overhead_ticks(overhead_hours: float, gap_hours: float) -> int:
    return round(overhead_hours / gap_hours)  # Python's round: halves go to even


@dataclass(frozen=True)
class SimCase:
    """One job against one or more zone traces (all with the same gap)."""

    traces: tuple[Trace, ...]
    start_tick: int
    work_hours: float
    deadline_hours: float
    overhead_hours: float
    on_demand_price: float
    spot_price: float
    # Ticks of each zone's trace before `start_tick` that the launcher watched (0: none): given to
    # the policy as what was seen before the run (`ZoneHistory`, capped), as the controller gives
    # it what other runs saw (controller/placement_history.py).
    history_ticks: int = 0

    def __post_init__(self) -> None:
        if self.history_ticks < 0:
            raise ValueError("history_ticks must be >= 0")

    @property
    def gap_hours(self) -> float:
        return self.traces[0].gap_hours


@dataclass(frozen=True)
class SimResult:
    policy: str
    cost: float
    finished: bool
    met_deadline: bool
    hours: float  # from start to completion (or to where the run stopped)
    preemptions: int
    switches: int  # direct changes of cluster (spot <-> on-demand, zone to zone)
    starts: int  # cluster starts, each paying the restart overhead
    spot_hours: float
    on_demand_hours: float
    work_ticks: int
    deadline_ticks: int
    overhead_ticks: int
    refused: int = 0  # spot starts refused for want of capacity (only without a capacity signal)


class PolicyBugError(RuntimeError):
    """A policy chose spot where none was available: a bug in the policy, not bad input."""


def simulate(policy: PlacementPolicy, case: SimCase, *, capacity_signal: bool = True,
             max_probe_hours: float = 16 / 60) -> SimResult:  # fmt: skip
    g = case.gap_hours
    W = work_ticks(case.work_hours, g)
    D = deadline_ticks(case.deadline_hours, g)
    O = overhead_ticks(case.overhead_hours, g)
    zones = case.traces if policy.multi_zone else case.traces[:1]
    avail_rows = [z.available for z in zones]
    n_zones = len(zones)
    cap = D + W + 2 * O + 1
    sp, od = case.spot_price, case.on_demand_price

    policy.reset()
    lo = max(0, case.start_tick - case.history_ticks)
    if case.start_tick - lo >= 2:  # the ticks watched before the job: what the policy starts from
        for z, row in enumerate(avail_rows):
            policy.seed_history(z, history_of_ticks(row[lo : case.start_tick], g).capped())
    held, zone, k = Choice.NONE, 0, 0  # cluster held, its zone, overhead ticks still to pay
    done = t = 0
    cost = 0.0
    preemptions = switches = starts = spot_ticks = od_ticks = refused = 0
    probes = None if capacity_signal else ProbedCapacity(1.0, max(1.0, max_probe_hours / g))
    seen = None
    while done < W and t < cap:
        idx = case.start_tick + t
        avail = tuple(idx < len(row) and row[idx] for row in avail_rows)
        if held is Choice.SPOT and not avail[zone]:
            held, k = Choice.NONE, 0
            preemptions += 1
            if probes is not None:
                probes.refused(zone, t)
        truth = avail
        if probes is not None:
            views = [(True, True) if held is Choice.SPOT and z == zone else probes.view(z, t) for z in range(n_zones)]
            avail, seen = tuple(v[0] for v in views), tuple(v[1] for v in views)
        state = DecisionState(
            elapsed_hours=t * g,
            work_done_hours=done * g,
            work_total_hours=W * g,
            deadline_hours=D * g,
            restart_overhead_hours=O * g,
            current=held,
            current_zone=zone,
            spot_available=avail,
            gap_hours=g,
            spot_price_usd_per_hour=sp,
            on_demand_price_usd_per_hour=od,
            preemptions=preemptions,
            overhead_remaining_hours=k * g,
            spot_observed=seen,
        )
        d = policy.decide(state)
        choice, to_zone = d.choice, d.zone
        if probes is not None and choice is Choice.SPOT and not (held is Choice.SPOT and d.zone == zone):
            if 0 <= d.zone < n_zones and avail[d.zone] and not truth[d.zone]:
                probes.refused(d.zone, t)  # a probe that found no capacity: what was held runs on
                refused += 1
                choice, to_zone = held, zone
                if held is not Choice.SPOT:
                    zone = d.zone  # it looked there: the zone the controller names next (`PlacementDriver.held`)
            elif 0 <= d.zone < n_zones and avail[d.zone]:
                probes.running(d.zone)
        if choice is Choice.NONE:
            held, k = Choice.NONE, 0
        else:
            new_zone = zone
            if choice is Choice.SPOT:
                new_zone = to_zone
                if not (0 <= new_zone < n_zones and avail[new_zone]):
                    raise PolicyBugError(f"{policy.name} chose spot in zone {new_zone} at tick {t} without capacity")
            same = choice is held and (choice is Choice.ON_DEMAND or new_zone == zone)
            if not same:
                starts += 1
                if held is not Choice.NONE:
                    switches += 1
                held, zone, k = choice, new_zone, O
            if choice is Choice.SPOT:
                cost += sp
                spot_ticks += 1
            else:
                cost += od
                od_ticks += 1
            if k > 0:
                k -= 1
            else:
                done += 1
        t += 1
    finished = done >= W
    return SimResult(
        policy=policy.name,
        cost=cost * g,
        finished=finished,
        met_deadline=finished and t <= D,
        hours=t * g,
        preemptions=preemptions,
        switches=switches,
        starts=starts,
        spot_hours=spot_ticks * g,
        on_demand_hours=od_ticks * g,
        work_ticks=W,
        deadline_ticks=D,
        overhead_ticks=O,
        refused=refused,
    )


def simulate_many(policy: PlacementPolicy, cases: Sequence[SimCase]) -> list[SimResult]:
    return [simulate(policy, c) for c in cases]
