"""Expected cost to finish under an estimated availability model: dynamic programming over (time step,
work left, what is held and whether capacity is up), the estimated-model twin of the exact optimum
(`launcher.simulation.omniscient`, which knows the trace).

Time from now to the deadline is cut into N steps of `step` hours (coarse: at most `max_steps`, at
least two restart overheads each); work left is a grid of the same spacing, read between points by
linear interpolation. States at the start of a step: idle with capacity down / up (N0, N1), on a
live spot cluster (S), on on-demand with capacity down / up (D0, D1). Actions: wait, on-demand
(start or stay), spot (start or stay). Over one step a spot cluster survives with the model's
predictive chance; if preempted, it ran for the expected time up before the preemption and the run is
idle for the rest of the step. Every start pays the restart overhead (time billed, no progress).
Work not done at the deadline costs `penalty_per_hour` per hour left, so the deadline acts as a hard
constraint (the safety net in `safety.enforce` makes it one at every tick).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

N0, N1, S, D0, D1 = range(5)
STATES = 5


@dataclass(frozen=True)
class StepModel:
    """What the model predicts for one step of `dt` hours starting at a given time."""

    up_stays_up: float  # P(capacity up at the end | up at the start)
    down_comes_up: float  # P(capacity up at the end | down at the start)
    spot_survives: float  # P(the spot cluster is not preempted during the step)
    spot_up_if_preempted: float  # expected hours the spot cluster ran before the preemption
    up_after_preemption: float  # P(capacity up at the end | the spot cluster was preempted)
    # Waiting while capacity is down, then starting spot as soon as it returns within the step:
    back_at: float = 0.0  # expected hours into the step when capacity returns (given it does)
    spot_survives_rest: float = 0.0  # P(that spot cluster lasts to the end of the step)
    spot_up_rest_if_preempted: float = 0.0  # expected hours it ran, if preempted


@dataclass(frozen=True)
class Prices:
    on_demand: float
    spot: float
    overhead_hours: float


def _shift(rows: np.ndarray, prog: float, step: float) -> np.ndarray:
    """`rows` (values at work left k * step, last axis) read at k * step - prog; below 0 reads column 0 (done)."""
    if prog <= 0:
        return rows
    x = prog / step
    j = int(x)
    f = x - j
    n = rows.shape[-1]
    a = np.empty_like(rows)
    a[..., : min(j, n)] = rows[..., :1]
    if j < n:
        a[..., j:] = rows[..., : n - j]
    if f < 1e-12:
        return a
    b = np.empty_like(rows)
    b[..., : min(j + 1, n)] = rows[..., :1]
    if j + 1 < n:
        b[..., j + 1 :] = rows[..., : n - j - 1]
    return (1.0 - f) * a + f * b


class _Grid:
    """Reads value rows over the whole work grid, shifting all states at once per amount of progress."""

    __slots__ = ("vn", "step", "_cache")

    def __init__(self, vn: np.ndarray, step: float) -> None:
        self.vn, self.step, self._cache = vn, step, {}

    def __call__(self, s: int, prog: float) -> np.ndarray:
        m = self._cache.get(prog)
        if m is None:
            m = self._cache[prog] = _shift(self.vn, prog, self.step)
        return m[s]


class _Point:
    """Reads value rows at one amount of work left (the tick-level decision)."""

    __slots__ = ("vn", "w", "step")

    def __init__(self, vn: np.ndarray, w: float, step: float) -> None:
        self.vn, self.w, self.step = vn, w, step

    def __call__(self, s: int, prog: float) -> float:
        row = self.vn[s]
        x = (self.w - prog) / self.step
        if x <= 0:
            return float(row[0])
        i = int(x)
        if i >= len(row) - 1:
            return float(row[-1])
        f = x - i
        return float(row[i]) * (1.0 - f) + float(row[i + 1]) * f


def q_values(vn: np.ndarray, grid: np.ndarray, dt: float, m: StepModel, p: Prices, overhead_left: float = 0.0,
             w: float | None = None) -> dict:  # fmt: skip
    """Expected cost of each action over one step of `dt` hours plus the value after it (`vn`,
    shape (STATES, len(grid)), the values at the end of the step): rows over the grid, or numbers
    at work left `w`. `overhead_left`: restart overhead still owed on the cluster held now (the
    'stay' actions pay it first)."""
    step = float(grid[1] - grid[0])
    if w is None:
        at = _Grid(vn, step)
        work = grid
        least = np.minimum
    else:
        at = _Point(vn, w, step)
        work = w
        least = min
    o, od, sp = p.overhead_hours, p.on_demand, p.spot
    uu, du = m.up_stays_up, m.down_comes_up
    surv, mu, q = m.spot_survives, m.spot_up_if_preempted, m.up_after_preemption
    start_prog = max(0.0, dt - o)
    stay_prog = max(0.0, dt - overhead_left)
    n1, n0 = at(N1, 0.0), at(N0, 0.0)

    def on_demand(prog: float, owed: float, a: float):
        return od * (owed + least(work, prog)) + a * at(D1, prog) + (1 - a) * at(D0, prog)

    def spot(prog: float, owed: float):
        pre = max(0.0, mu - owed)
        alive = sp * (owed + least(work, prog)) + at(S, prog)
        lost = sp * least(mu, owed + work) + q * at(N1, pre) + (1 - q) * at(N0, pre)
        return surv * alive + (1 - surv) * lost

    wait_down = du * n1 + (1 - du) * n0
    rest = dt - m.back_at
    if du > 0 and rest > o:
        # Wait, and start spot the moment capacity returns (the tick-level policy does): worth it
        # for the amounts of work left where it beats waiting out the step.
        s2, mu2 = m.spot_survives_rest, m.spot_up_rest_if_preempted
        alive = sp * least(work, rest) + at(S, rest - o)
        lost = sp * least(mu2, o + work) + q * at(N1, max(0.0, mu2 - o)) + (1 - q) * at(N0, max(0.0, mu2 - o))
        wait_down = least(wait_down, du * (s2 * alive + (1 - s2) * lost) + (1 - du) * n0)
    out = {
        "wait_down": wait_down,
        "wait_up": uu * n1 + (1 - uu) * n0,
        "od_start_down": on_demand(start_prog, o, du),
        "od_start_up": on_demand(start_prog, o, uu),
        "spot_start": spot(start_prog, o),
    }
    out["od_stay_down"] = on_demand(stay_prog, overhead_left, du)
    out["od_stay_up"] = on_demand(stay_prog, overhead_left, uu)
    out["spot_stay"] = spot(stay_prog, overhead_left)
    return out


# The actions each state may take (keys of `q_values`).
ACTIONS: dict[int, tuple[str, ...]] = {
    N0: ("wait_down", "od_start_down"),
    N1: ("wait_up", "od_start_up", "spot_start"),
    S: ("spot_stay", "od_start_up", "wait_up"),
    D0: ("od_stay_down", "wait_down"),
    D1: ("od_stay_up", "spot_start", "wait_up"),
}


class ValueTable:
    """V[i, state, k]: expected cost from step i (time `t0 + i * step`) with `k * step` hours of work left."""

    __slots__ = ("t0", "step", "n", "w", "v", "prices")

    def __init__(self, t0: float, step: float, w: np.ndarray, v: np.ndarray, prices: Prices) -> None:
        self.t0, self.step, self.w, self.v, self.prices = t0, step, w, v, prices
        self.n = v.shape[0] - 1

    def next_index(self, now: float) -> int:
        """The grid time at least half a step ahead of `now` (capped at the deadline step)."""
        i = math.ceil((now - self.t0) / self.step + 0.5 - 1e-9)
        return min(max(i, 1), self.n)

    def value(self, i: int, state: int, work_left: float) -> float:
        return float(np.interp(work_left, self.w, self.v[i, state]))


def solve(t0: float, time_left: float, work_left: float, prices: Prices, step_model, *, max_steps: int = 96,
          penalty_per_hour: float | None = None) -> ValueTable:  # fmt: skip
    """Backward induction from the deadline. `step_model(t_hours, dt)` gives the StepModel of the step
    starting at absolute run time `t_hours`."""
    it = solve_in_chunks(t0, time_left, work_left, prices, step_model, max_steps=max_steps,
                         penalty_per_hour=penalty_per_hour, chunk=1 << 30)  # fmt: skip
    while True:
        try:
            next(it)
        except StopIteration as done:
            return done.value


def solve_in_chunks(t0: float, time_left: float, work_left: float, prices: Prices, step_model, *, max_steps: int = 96,
                    penalty_per_hour: float | None = None, chunk: int = 12):  # fmt: skip
    """`solve` as a generator that pauses after every `chunk` time steps (so a decision never waits
    for a whole solve); its return value is the ValueTable."""
    o = prices.overhead_hours
    step = max(time_left / max_steps, 2.0 * o, 1e-3)
    n = max(1, math.floor(time_left / step + 1e-9))
    step = time_left / n
    k = max(2, math.ceil(work_left / step + 1e-9) + 2)
    w = np.arange(k, dtype=float) * step
    pen = penalty_per_hour if penalty_per_hour is not None else 20.0 * max(prices.on_demand, 1e-9)
    v = np.empty((n + 1, STATES, k))
    v[n] = pen * w
    for i in range(n - 1, -1, -1):
        if (n - 1 - i) and (n - 1 - i) % chunk == 0:
            yield None
        q = q_values(v[i + 1], w, step, step_model(t0 + i * step, step), prices)
        for s, acts in ACTIONS.items():
            row = q[acts[0]]
            for a in acts[1:]:
                row = np.minimum(row, q[a])
            v[i, s] = row
        v[i, :, 0] = 0.0
    return ValueTable(t0, step, w, v, prices)
