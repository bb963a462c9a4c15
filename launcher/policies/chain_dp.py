"""The exact dynamic programme behind `markov-dp` and the benchmark's online optimum: the least
expected cost to finish, never missing the deadline, when spot capacity is a two-state chain whose
per-tick probabilities are given, under the simulator's rules (`launcher.simulation.engine`).

State at the decision of tick t (after a preemption has been applied): progress p, the cluster held
(none, on-demand, spot), the restart overhead ticks it still owes k, and capacity up or down now.
Actions: wait (drop what is held), on-demand (start or stay), spot (start or stay, capacity up). A
start owes O ticks (billed, no progress); a spot cluster dies at the first tick without capacity;
the run ends at W ticks of progress; a state from which the work cannot finish by the deadline has
infinite cost, so the policy never risks a miss.
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref

import numpy as np

from launcher.policies.base import Choice

_INF = math.inf


class ChainTable:
    """What `solve_chain` returns: actions (and, with `values`, expected costs) per tick, state and
    progress, for a job of W ticks of work, O ticks of overhead and D ticks to the deadline.

    States are laid out so that a tick's backward step is a few whole-block array operations: the
    capacity-down block (none, then on-demand owing k = 0..O), the capacity-up block in the same
    order, then spot owing k (capacity up).

    `action` and `values` are valid while the table lives and until `release()` (called once its
    owner no longer reads it, or when it is garbage): then their memory goes back to `TABLE_MEMORY`
    for the next table, so hold the table, not its arrays."""

    def __init__(self, W: int, O: int, D: int, *, values: bool = False) -> None:
        self.W, self.O, self.D = W, O, D
        K = O + 1
        B = K + 1  # states per capacity block
        self.none = (0, B)  # capacity down, up
        self.od = [(1 + k, B + 1 + k) for k in range(K)]
        self.spot = [2 * B + k for k in range(K)]
        self.n_states = 2 * B + K
        # Every row is written by the solve, so memory a retired table leaves serves as well as new
        # memory, and costs no page faults (on a VM, first touches of new memory can cost more than
        # the solve): tables take it from, and give it back to, the process's TABLE_MEMORY.
        shape = (D, self.n_states, W)
        self.action, flat_action = _array(shape, np.int8)
        self.values: np.ndarray | None = None
        flat_values = None
        if values:
            self.values, flat_values = _array(shape, np.float32)
        self.release = weakref.finalize(self, TABLE_MEMORY.give, flat_action, flat_values)
        self.release.atexit = False
        self.v0: np.ndarray | None = None
        # What the solve was given, for `action_values`.
        self.p_up_stays: np.ndarray | None = None
        self.p_down_stays: np.ndarray | None = None
        self.od_tick = self.sp_tick = self.slack_tick_cost = 0.0

    def state_index(self, held: Choice, owed: int, up: bool) -> int:
        owed = min(max(owed, 0), self.O)
        if held is Choice.SPOT and up:
            return self.spot[owed]
        if held is Choice.ON_DEMAND:
            return self.od[owed][int(up)]
        return self.none[int(up)]

    def choose(self, t: int, p: int, held: Choice, owed: int, up: bool) -> Choice:
        if p >= self.W:
            return Choice.NONE
        t = min(max(t, 0), self.D - 1)
        a = int(self.action[t, self.state_index(held, owed, up), max(p, 0)])
        return (Choice.NONE, Choice.ON_DEMAND, Choice.SPOT)[a]

    def action_values(self, t: int, p: int, held: Choice, owed: int, up: bool) -> dict[Choice, float]:
        """Expected cost to finish (USD) of each action open at the decision of tick t: one step of the
        backward induction from tick t + 1's values (needs `values`), before the idle start margin, so
        a reason can say what the chosen action saves over the next best. A held spot cluster is priced
        too (keep, drop, or move to on-demand), though the policies keep a live one without asking."""
        if p >= self.W:
            return {}
        assert self.values is not None and self.p_up_stays is not None
        t, p, O = min(max(t, 0), self.D - 1), max(p, 0), self.O

        def at(row: int, q: int) -> float:  # value at the next decision
            if q >= self.W:
                return 0.0
            return float(self.values[t + 1, row, q]) if t + 1 < self.D else _INF

        def mix(prob: float, a: tuple[int, int], b: tuple[int, int]) -> float:  # branch of chance 0: no cost
            return (prob * at(*a) if prob > 0 else 0.0) + ((1.0 - prob) * at(*b) if prob < 1 else 0.0)

        stay = float(self.p_up_stays[t])
        to_up = stay if up else 1.0 - float(self.p_down_stays[t])  # capacity up at the next decision
        out = {}
        idle = 0.0
        if self.slack_tick_cost:
            idle = self.slack_tick_cost * O / max((self.D - t) - (self.W - p), 1)
        out[Choice.NONE] = idle + mix(to_up, (self.none[1], p), (self.none[0], p))
        k = min(max(owed, 0), O) if held is Choice.ON_DEMAND else O
        row, q = (self.od[k - 1], p) if k > 0 else (self.od[0], p + 1)
        out[Choice.ON_DEMAND] = self.od_tick + mix(to_up, (row[1], q), (row[0], q))
        if up:
            k = min(max(owed, 0), O) if held is Choice.SPOT else O
            row, q = (self.spot[k - 1], p) if k > 0 else (self.spot[0], p + 1)
            out[Choice.SPOT] = self.sp_tick + mix(stay, (row, q), (self.none[0], q))  # preempted: idle, down
        return out

    def value(self, t: int, p: int, held: Choice, owed: int, up: bool) -> float:
        """Expected cost to finish (USD) at the decision of tick t (needs `values`)."""
        if p >= self.W:
            return 0.0
        assert self.values is not None
        t = min(max(t, 0), self.D - 1)
        return float(self.values[t, self.state_index(held, owed, up), max(p, 0)])


def solve_chain(p_up_stays: np.ndarray, p_down_stays: np.ndarray, W: int, O: int, od_tick: float, sp_tick: float,
                *, values: bool = False, chunk: int = 1 << 30, idle_start_margin: float = 0.0,
                slack_tick_cost: float = 0.0):  # fmt: skip
    """Backward induction over D = len(p_up_stays) ticks, the chain's probabilities per tick
    (`p_up_stays[t]`: capacity up at t stays up at t + 1); prices per tick. A generator that pauses
    after every `chunk` ticks, so a caller can spread a solve over several decisions; its return
    value is the ChainTable.

    `idle_start_margin` (USD, default 0: the exact optimum): idle with capacity up, start spot unless
    another action is expected to save more than this. For a caller whose chain is an estimate: where
    the deadline is far, starting now and starting later cost about the same under the chain, and
    the slight differences of an estimate would otherwise decide to spend slack that the truth may
    need.

    `slack_tick_cost` (USD, default 0): a price on slack, charged for every tick without a cluster:
    this much when O ticks of slack (ticks left minus work left) are left, in proportion to O / slack
    otherwise, so the last restarts' worth of slack is the dearest. For the same kind of caller: a
    point estimate of a chain that stays short sees no use for slack it could keep by running
    on-demand, so it waits until the deadline forces on-demand for the rest; if the chain then
    changes (a long spell comes), the slack that would have let it hop to spot is gone. The values
    include the charge."""
    D = len(p_up_stays)
    tab = ChainTable(W, O, D, values=values)
    tab.p_up_stays, tab.p_down_stays = p_up_stays, p_down_stays
    tab.od_tick, tab.sp_tick, tab.slack_tick_cost = od_tick, sp_tick, slack_tick_cost
    K = O + 1
    B = K + 1
    n = tab.n_states
    v_next = np.full((n, W), _INF)
    v = np.empty_like(v_next)
    work_left = W - np.arange(W)
    # Per state row, the on-demand candidate (start, or stay owing k) and, for the capacity-up rows
    # and spot rows, the spot candidate; each tick writes them in place.
    odc = np.empty((n, W))
    run_od = odc[: 2 * B].reshape(2, B, W)  # [capacity now down / up, none + on-demand owing k]
    spc = np.empty((B + K, W))
    run_sp = spc[B:]
    margin = None
    if idle_start_margin:
        margin = np.zeros((B + K, 1))
        margin[0] = idle_start_margin  # idle with capacity up: the first row of the up block
    for t in range(D - 1, -1, -1):
        if (D - 1 - t) and (D - 1 - t) % chunk == 0:
            yield None
        p_up = float(p_up_stays[t])
        # The next decision's value of each cluster held after this tick, capacity down now, up now.
        nxt = _mix_blocks((1.0 - float(p_down_stays[t]), p_up), v_next[B : 2 * B], v_next[:B])
        # Holding with k owed at this tick: overhead first (k - 1 owed next), then progress.
        np.add(nxt[:, 1:K], od_tick, out=run_od[:, 2:])
        np.add(nxt[:, 1, 1:], od_tick, out=run_od[:, 1, :-1])
        run_od[:, 1, -1] = od_tick  # the last tick of work: done
        run_od[:, 0] = run_od[:, 1 + O]  # idle: start on-demand
        odc[2 * B :] = run_od[1, 1 + O]  # on spot: move to on-demand (capacity up)
        n_spot = _mix(p_up, v_next[2 * B :], v_next[0])  # preempted to none when capacity goes
        np.add(n_spot[:-1], sp_tick, out=run_sp[1:])
        np.add(n_spot[0, 1:], sp_tick, out=run_sp[0, :-1])
        run_sp[0, -1] = sp_tick
        spc[:B] = run_sp[O]  # idle or on-demand, capacity up: start spot
        wait = nxt[:, 0]
        if slack_tick_cost:
            wait = wait + slack_tick_cost * O / np.maximum((D - t) - work_left, 1)
        act = tab.action[t]
        # Capacity down: wait or on-demand; a tie waits (it keeps the chance of spot).
        take = odc[:B] < wait[0] * (1.0 - _TIE) - _TIE
        v[:B] = np.where(take, odc[:B], wait[0])
        act[:B] = take
        # Capacity up: also spot; a tie with spot takes spot (progress now, at the same cost), and
        # so does spot within the margin of the least, idle.
        take = odc[B:] < wait[1] * (1.0 - _TIE) - _TIE
        best = np.where(take, odc[B:], wait[1])
        bar = best * (1.0 + _TIE) + _TIE
        if margin is not None:
            bar = bar + margin
        take_spot = spc <= bar
        v[B:] = np.where(take_spot, spc, best)
        act[B:] = np.where(take_spot, np.int8(2), take)
        if values:
            tab.values[t] = v
        v_next, v = v, v_next
    tab.v0 = v_next
    return tab


def pick_action(options: dict[Choice, float], held: Choice, up: bool, idle_start_margin: float = 0.0,
                tie: float = 1e-6) -> Choice:  # fmt: skip
    """The choice `solve_chain` makes among actions whose expected costs are `options` (as
    `ChainTable.action_values` gives them), by the same rule: capacity down, on-demand only if cheaper
    than waiting (a tie waits); capacity up, spot if no dearer than the better of those, or, idle,
    within `idle_start_margin` of it. For a caller whose values are not one table's (an average over
    several chains). `tie`: relative, within it costs are equal; the tables' values are float32
    (about 7 digits), so two actions the solve found equal can differ in their last digit here."""
    wait, od = options[Choice.NONE], options[Choice.ON_DEMAND]
    choice, best = (Choice.ON_DEMAND, od) if od < wait * (1.0 - tie) - tie else (Choice.NONE, wait)
    spot = options.get(Choice.SPOT)
    if up and spot is not None:
        bar = best * (1.0 + tie) + tie + (idle_start_margin if held is Choice.NONE else 0.0)
        if spot <= bar:
            choice = Choice.SPOT
    return choice


def drain(gen):
    while True:
        try:
            next(gen)
        except StopIteration as done:
            return done.value


def _array(shape: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """An array of `shape` and the 1-d memory under it: released memory when some is large enough, else new."""
    size = math.prod(shape)
    dtype = np.dtype(dtype)
    flat = TABLE_MEMORY.take(size, dtype)
    if flat is None:
        flat = _small_pages(size, dtype) if size * dtype.itemsize >= TABLE_MEMORY.min_bytes else np.empty(size, dtype)
    return flat[:size].reshape(shape), flat


def _small_pages(size: int, dtype: np.dtype) -> np.ndarray:
    """A new array in memory mapped in small (4 kB) pages. numpy asks the kernel for 2 MB pages for
    arrays of 4 MB and more; the first write to one is one fault that backs all 2 MB at once, which
    on this VM took 15-19 ms of system time, so a chunk of a solve that crossed into a new one took
    20-46 ms. In small pages the same cost is spread evenly over the solve's writes."""
    if not hasattr(mmap, "MADV_NOHUGEPAGE"):  # no transparent huge pages here (not Linux)
        return np.empty(size, dtype)
    m = mmap.mmap(-1, size * dtype.itemsize)
    m.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(m, dtype=dtype, count=size)


class TableMemory:
    """Memory released by tables no longer read, kept for the next tables of this process: the next
    solve of a run, the next case of a replay, the next run a server drives: the first touch of new
    memory costs system time (on this VM the host backs each page then), and reused memory costs none.

    Arrays under `min_bytes` are left to the allocator; at most `cap_bytes` is kept, the largest
    arrays first (they fit most tables). Thread-safe: the server may drive runs in threads. A table's
    memory also comes back when the garbage collector finalizes it, which can happen at any
    allocation, inside `take` or `give` too: so `give` only queues the arrays while another call
    holds the lock, and the next call that takes the lock merges the queue (a kept list changed under
    a `take` would hand out the wrong, too small, array).
    """

    def __init__(self, cap_bytes: int = 192 << 20, min_bytes: int = 1 << 20) -> None:
        self.cap_bytes, self.min_bytes = cap_bytes, min_bytes
        self._free: list[np.ndarray] = []  # kept, largest first; changed only under the lock
        self._given: list[np.ndarray] = []  # given while the lock was held; merged under it
        self._lock = threading.Lock()  # not re-entrant: a finalizer inside a call must not get in

    def take(self, size: int, dtype: np.dtype) -> np.ndarray | None:
        """The smallest kept array of `dtype` with at least `size` items (no longer kept), or None."""
        if size * dtype.itemsize < self.min_bytes:
            return None
        with self._lock:
            self._merge()
            best = None
            for i, a in enumerate(self._free):
                if a.dtype == dtype and a.size >= size and (best is None or a.size < self._free[best].size):
                    best = i
            return None if best is None else self._free.pop(best)

    def give(self, *arrays: np.ndarray | None) -> None:
        items = [a for a in arrays if a is not None and a.nbytes >= self.min_bytes]
        self._given.extend(items)  # one step under the GIL, from a list: no Python code runs in it
        if self._lock.acquire(blocking=False):  # else the call holding it, or the next one, merges them
            try:
                self._merge()
            finally:
                self._lock.release()

    def _merge(self) -> None:
        """Queued arrays into the kept list, then the cap (the lock is held)."""
        while self._given:
            self._free.append(self._given.pop())
        self._free.sort(key=lambda a: -a.nbytes)
        kept, total = [], 0
        for a in self._free:
            if total + a.nbytes <= self.cap_bytes:
                kept.append(a)
                total += a.nbytes
        self._free[:] = kept

    def kept_bytes(self) -> int:
        with self._lock:
            self._merge()
            return sum(a.nbytes for a in self._free)


TABLE_MEMORY = TableMemory()


_TIE = 1e-9  # relative: within this, costs are equal (float noise)


def _mix(p: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """p * a + (1 - p) * b, where a branch of probability 0 does not count (0 * inf is no cost)."""
    if 0.0 < p < 1.0:
        return p * a + (1.0 - p) * b
    keep, other = (b, a) if p <= 0.0 else (a, b)
    return keep if keep.shape == other.shape else np.broadcast_to(keep, np.broadcast_shapes(a.shape, b.shape))


def _mix_blocks(p: tuple[float, float], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`_mix` for each of the two probabilities, stacked: shape (2, *a.shape)."""
    if 0.0 < p[0] < 1.0 and 0.0 < p[1] < 1.0:
        col = np.array(p).reshape(2, *(1,) * a.ndim)
        return col * a + (1.0 - col) * b
    return np.stack([_mix(q, a, b) for q in p])
