"""The omniscient optimum: the least cost any policy could reach on a case, knowing the whole trace.

Exact dynamic programme over (tick, progress, cluster) under the simulator's semantics. Why it is a
true lower bound: take any run of any policy and cut its timeline into *runs* (maximal stretches
holding one cluster). A run of length n yields max(0, n - O) progress ticks and a spot run must sit in
available ticks; a run that yields nothing (shorter than O, or a spot run preempted during its
overhead) can be dropped without changing the others' starts, so the cost only falls. What remains
is a sequence of runs "start, O overhead ticks, then productive ticks" separated by idle ticks, which
is exactly the transition system below; the DP minimises over all of them.

State at the start of tick t: idle[p], or productive on cluster c (on-demand, or spot in zone z)
with progress p. Transitions: drop to idle (free); start cluster c at t -> productive at t + O
with the same p, paying O ticks of c's price (spot needs capacity in all O ticks); a productive
tick adds 1 to p at c's price. Spot states die at the start of an unavailable tick.
"""

from __future__ import annotations

import numpy as np

from launcher.simulation.engine import SimCase, deadline_ticks, overhead_ticks, work_ticks


def omniscient_cost(case: SimCase, *, multi_zone: bool = False) -> float | None:
    """Least cost (USD) to finish within the deadline, or None if no schedule meets it."""
    g = case.gap_hours
    W = work_ticks(case.work_hours, g)
    D = deadline_ticks(case.deadline_hours, g)
    O = overhead_ticks(case.overhead_hours, g)
    if W == 0:
        return 0.0
    if W + O > D:
        return None
    zones = case.traces if multi_zone else case.traces[:1]
    Z = len(zones)
    avail = np.zeros((Z, D + O + 1), dtype=bool)
    for zi, tr in enumerate(zones):
        row = np.asarray(tr.available[case.start_tick : case.start_tick + D], dtype=bool)
        avail[zi, : len(row)] = row
    # ok_start[z, t]: a spot start at t survives its overhead (capacity in ticks t .. t+O-1).
    if O > 0:
        cs = np.zeros((Z, avail.shape[1] + 1), dtype=np.int64)
        cs[:, 1:] = np.cumsum(avail, axis=1)
        ok_start = (cs[:, O : O + D] - cs[:, 0:D]) == O
    else:
        ok_start = avail[:, :D]

    inf = np.inf
    n_c = 1 + Z  # cluster 0 = on-demand, 1.. = spot zones
    price = np.array([case.on_demand_price] + [case.spot_price] * Z)[:, None]
    idle = np.full(W, inf)
    idle[0] = 0.0
    prod = np.full((n_c, W), inf)
    # Arrivals (productive at tick t + O after a start at t), one slot per tick modulo O + 1; each
    # slot is written once per cycle (at t) and read once (at t + O), so no clearing is needed.
    ring = np.full((O + 1, n_c, W), inf)
    ring_ok = np.zeros((O + 1, n_c), dtype=bool)
    ring_hi = np.zeros(O + 1, dtype=np.int64)
    best = inf
    for t in range(D):
        # Only progress values that are reachable (p <= t) and can still finish (p >= W - (D - t)).
        lo, hi = max(0, W - (D - t)), min(t, W - 1)
        if lo > 0:
            idle[lo - 1] = inf
            prod[:, lo - 1] = inf
        sl = slice(lo, hi + 1)
        if O > 0:
            slot = t % (O + 1)
            if t >= O:
                a_hi = int(ring_hi[slot])
                for c in np.flatnonzero(ring_ok[slot]):
                    if a_hi >= lo:
                        seg = slice(lo, a_hi + 1)
                        np.minimum(prod[c, seg], ring[slot, c, seg], out=prod[c, seg])
        for zi in range(Z):
            if not avail[zi, t]:  # preempted: progress kept, back to idle
                np.minimum(idle[sl], prod[1 + zi, sl], out=idle[sl])
                prod[1 + zi, sl] = inf
        any_ = np.minimum(idle[sl], prod[:, sl].min(axis=0))
        if O == 0:
            np.minimum(prod[0, sl], any_, out=prod[0, sl])
            for zi in range(Z):
                if avail[zi, t]:
                    np.minimum(prod[1 + zi, sl], any_, out=prod[1 + zi, sl])
        else:
            w = (t + O) % (O + 1)
            ring_hi[w] = hi
            ring_ok[w, 0] = True
            ring[w, 0, sl] = any_ + O * price[0, 0]
            for zi in range(Z):
                ok = bool(ok_start[zi, t])
                ring_ok[w, 1 + zi] = ok
                if ok:
                    ring[w, 1 + zi, sl] = any_ + O * price[1 + zi, 0]
        # One productive tick on every live cluster; reaching W finishes the job.
        step = prod[:, sl] + price
        if hi == W - 1:
            best = min(best, float(step[:, -1].min()))
            prod[:, lo + 1 : W] = step[:, :-1]
        else:
            prod[:, lo + 1 : hi + 2] = step
        prod[:, lo] = inf
        idle[sl] = any_
    return None if best == inf else best * g
