"""How far `markov-dp` is from the best online policy on two of the second generator's regimes.

    .venv/bin/python bench/bench_judging_bound.py [--seeds 6] [--workers 2]

The goals read cost / exact optimum, and the exact optimum knows the whole trace. Two of the second
generator's regimes (`launcher.simulation.synthetic_shifted`, the judging set never tuned on) draw a
zone's capacity from a law an exact online solver can take as given, so the best any online policy
can do there is computed, not guessed:

- **daily-weekly**: a two-state chain whose per-tick probabilities follow the zone's daily and weekly
  cycles. Told the zone's chain tick by tick (base share, cycles, memory, the zone's phase: the
  generator's own draws), `chain_dp` is the exact online optimum: no policy that sees only the past
  does better in expectation on traces from that law. A lower bound for every online policy.
- **regime-shift**: memoryless spells whose means change at a time drawn per zone; a spell drawn
  before the shift keeps its mean however long it runs past it (a 45 h outage of the first regime can
  run 20 h into a regime of 0.4 h outages), and spells are whole ticks (a spell's first tick ends it
  with a chance of its own). As a chain over eight states (up or down, drawn before or after the
  shift, begun this tick: `shift_states`), which a policy told the law reads off the trace it has
  seen, `launcher.simulation.labelled_chain_optimum` solves it exactly: the first row. It is also
  told when the spell running at the case's start began, which a run cannot see: a little more than
  the law, so still a lower bound for every online policy. The second row, a policy told only the
  means and the hour of the shift (`chain_dp` on the two-state chain that switches there), is what
  knowing that a spell keeps its regime's mean is worth.

For each regime, on its judging draws (seeds 0 to `--seeds` - 1, `bench_policies.py`'s job grid with
two start ticks, home zone, the capacity signal: with the default 6 seeds the full judging set's 72
cases of the regime), this prints per policy cost / exact optimum (mean, worst, cases above 1.05,
misses) and the paired difference against the first row (+- its standard error), measured in the
same run: the optimum told the law; for regime-shift the policy told the shift; the optimum told only
the case window's average chain (one rate for all hours: what knowing the cycle or the shift is
worth); `markov-dp` told that average chain (its prior at the chain's mean spells, worth a million
spells, one rate for all hours: what its guards, the start margin and the slack price, cost on that
memoryless chain); `markov-dp` learning one rate for all hours (`bin_weight` 10^6: what its
hour-of-day bins are worth); `markov-dp` as it runs, learning; `deadline-aware`, greedy and uniform
progress. The law is read by replaying the generator's random draws for zone 0 (`zone0_law`),
checked by building that zone's trace from them; a mismatch stops the bench.

The other three regimes (heavy-tail, zones-fail-together, mixed) draw spells whose chance to end
depends on their age without bound (Weibull, Pareto) or a zone's capacity as the product of several
processes; their online optimum needs a spell's age or the processes' joint state in the solver and
is not computed here.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_policies as bp  # noqa: E402
import model_policy_bench as mb  # noqa: E402

from launcher.policies.base import PlacementPolicy  # noqa: E402
from launcher.policies.registry import get_placement_policy  # noqa: E402
from launcher.simulation import synthetic_shifted as gen  # noqa: E402
from launcher.simulation.engine import SimCase, deadline_ticks, simulate  # noqa: E402
from launcher.simulation.labelled_chain_optimum import (  # noqa: E402
    LabelledChain,
    LabelledChainOptimumPolicy,
    labelled_table_for,
)
from launcher.simulation.omniscient import omniscient_cost  # noqa: E402
from launcher.simulation.online_optimum import MarkovSpells, OnlineOptimumPolicy, table_for  # noqa: E402

REGIMES = ("daily-weekly", "regime-shift")
YARDSTICK = "optimum told the law"
TOLD_SHIFT = "policy told the shift"
AVERAGE = "optimum told the window's average chain"
POLICIES = ("markov-dp", "deadline-aware", "greedy", "uniform-progress")


@dataclass(frozen=True)
class ZoneLaw:
    """Zone 0's capacity law: per trace tick i >= 1, the chance that capacity up at tick i - 1 is up
    at tick i, and that capacity down stays down (index 0 unused)."""

    p_up_stays: np.ndarray
    p_down_stays: np.ndarray
    # regime-shift only: the law as a chain over the states of `shift_states`, indexed by the tick a
    # step leaves, and the state of each trace tick
    labelled: LabelledChain | None = None
    state: np.ndarray | None = None
    shift: tuple[tuple[float, float], tuple[float, float], float] | None = None  # up means, down means, hour


def shift_states(up_means: tuple[float, float], down_means: tuple[float, float], at_hours: float, g: float,
                 n: int) -> LabelledChain:  # fmt: skip
    """The regime-shift law as a chain the exact solver takes: state c = 4 * up + 2 * drawn before the
    shift + began this tick. A spell drawn at tick j (hour j * g) has the mean of the regime then, kept
    however long it runs, and lasts max(1, round(X / g)) ticks for X exponential: it ends after its
    first tick with chance 1 - exp(-1.5 g / m), after each later one with 1 - exp(-g / m). The next
    spell, drawn at the tick it begins, is the other state's, in the regime of that tick.
    `up_means` / `down_means`: (before, after) the shift, hours."""
    step = np.zeros((n, 8, 8))
    pre_next = (np.arange(1, n + 1) * g < at_hours).astype(int)  # is a spell drawn at the next tick drawn before?
    for c in range(8):
        up, pre, fresh = c >> 2, (c >> 1) & 1, c & 1
        m = (up_means if up else down_means)[0 if pre else 1]
        ends = 1.0 - math.exp(-(1.5 if fresh else 1.0) * g / m)
        step[:, c, 4 * up + 2 * pre] = 1.0 - ends
        step[np.arange(n), c, 4 * (1 - up) + 2 * pre_next + 1] = ends
    return LabelledChain(step, np.array([c >> 2 == 1 for c in range(8)]))


def shift_state_of(trace: tuple[bool, ...], at_hours: float, g: float) -> np.ndarray:
    """Each tick's state in `shift_states`' numbering, read off the trace: spells alternate, so a
    spell begins where the trace changes (or at tick 0)."""
    out = np.empty(len(trace), dtype=np.int64)
    began = 0
    for i, up in enumerate(trace):
        if i and up != trace[i - 1]:
            began = i
        out[i] = 4 * int(up) + 2 * int(began * g < at_hours) + int(began == i)
    return out


@functools.cache
def zone0_law(regime: str, seed: int) -> ZoneLaw:
    """Replay `synthetic_shifted.generate`'s draws up to zone 0's parameters, and check them by
    building zone 0's trace from them with the generator's own pieces (`_markov`, `_alternate`): a
    generator that draws in another order, or other parameters, fails the check and stops the bench.
    Cached per process: a draw's cases share it (read only)."""
    hours, g = mb.HOURS, gen.GAP_SECONDS / 3600.0
    n = max(1, math.ceil(hours / g))
    rng = random.Random(f"shifted:{regime}:{seed}")
    shared = gen._shared(regime, rng, n, g, hours)
    t = np.arange(n) * g
    if regime == "daily-weekly":
        memory_h, shift_h = rng.uniform(0.3, 3.0), rng.uniform(-1.5, 1.5)
        built = gen._markov(rng, n, g, shared["base"], shared["cycle"], memory_h, shift_h)
        p = np.array([gen._p_up(x + shift_h, shared["base"], shared["cycle"]) for x in t])
        up_stays, down_stays = np.exp(-(1.0 - p) * g / memory_h), np.exp(-p * g / memory_h)
    elif regime == "regime-shift":
        (u1, d1), (u2, d2) = (gen._SHIFT_MENU[k] for k in shared["pair"])
        at = shared["shift_h"] + rng.uniform(-2.0, 2.0)
        s1, s2 = rng.uniform(0.7, 1.4), rng.uniform(0.7, 1.4)
        built = gen._alternate(rng, n, g, lambda x: rng.expovariate(1 / (s1 * u1 if x < at else s2 * u2)),
                               lambda x: rng.expovariate(1 / (s1 * d1 if x < at else s2 * d2)))  # fmt: skip
        up_mean = np.where(t < at, s1 * u1, s2 * u2)
        down_mean = np.where(t < at, s1 * d1, s2 * d2)
        up_stays, down_stays = np.exp(-g / up_mean), np.exp(-g / down_mean)
        shift = ((s1 * u1, s2 * u2), (s1 * d1, s2 * d2), at)
        labelled = shift_states(*shift, g, n)
        state = shift_state_of(tuple(built) + (False,) * 8, at, g)  # the simulator reads past the trace as down
    else:
        raise ValueError(f"no known law for regime {regime!r}")
    if regime != "regime-shift":
        labelled = state = shift = None
    if tuple(built) != gen.generate(regime, zones=mb.ZONES, hours=hours, seed=seed)[0].available:
        raise SystemExit(f"bench_judging_bound: the replayed draws of {regime} seed {seed} do not regenerate zone 0; "
                         "the generator changed, update zone0_law")  # fmt: skip
    return ZoneLaw(up_stays, down_stays, labelled, state, shift)


def tasks(seeds: range) -> list[tuple[str, SimCase, int]]:
    out = []
    for regime in REGIMES:
        for seed in seeds:
            traces = gen.generate(regime, zones=mb.ZONES, hours=mb.HOURS, seed=seed)
            out += [(regime, SimCase(traces[:1], *bp._rest(c)), seed) for c in bp.grid(traces, 2)]
    return out


def window(law: ZoneLaw, case: SimCase) -> tuple[np.ndarray, np.ndarray]:
    """The law's chain over the case's window, as `solve_chain` reads it: DP tick t decides at trace
    tick start + t, and its step leads to trace tick start + t + 1."""
    s, D = case.start_tick, deadline_ticks(case.deadline_hours, case.gap_hours)
    up, down = law.p_up_stays[s + 1 : s + 1 + D], law.p_down_stays[s + 1 : s + 1 + D]
    if len(up) < D:  # the window's last step lies past the trace: the run is over by then
        up, down = np.pad(up, (0, D - len(up)), mode="edge"), np.pad(down, (0, D - len(down)), mode="edge")
    return up, down


def labelled_window(chain: LabelledChain, case: SimCase) -> LabelledChain:
    """The labelled law's steps over the case's window: DP tick t leaves trace tick start + t."""
    s, D = case.start_tick, deadline_ticks(case.deadline_hours, case.gap_hours)
    step = chain.step[s : s + D]
    if len(step) < D:  # past the trace's end: the run is over by then
        step = np.concatenate([step, np.repeat(step[-1:], D - len(step), axis=0)])
    return LabelledChain(step, chain.up)


def row(args: tuple[str, SimCase, int]) -> dict:
    regime, case, seed = args
    law = zone0_law(regime, seed)
    up, down = window(law, case)
    g = case.gap_hours
    told = {"prior_up_hours": g / (1.0 - up.mean()), "prior_down_hours": g / (1.0 - down.mean())}
    runs: dict[str, PlacementPolicy] = {}
    if law.labelled is None:
        runs[YARDSTICK] = OnlineOptimumPolicy(table_for(case, (up, down)))
    else:
        runs[YARDSTICK] = LabelledChainOptimumPolicy(labelled_table_for(case, labelled_window(law.labelled, case)),
                                                     lambda t, s=case.start_tick, st=law.state: int(st[s + t]))
        runs[TOLD_SHIFT] = OnlineOptimumPolicy(table_for(case, (up, down)))
    runs |= {
        AVERAGE: OnlineOptimumPolicy(table_for(case, MarkovSpells(float(up.mean()), float(down.mean())))),
        # its prior at the average chain's means, worth a million spells, one rate for all hours
        "markov-dp told the window's average chain": get_placement_policy("markov-dp", **told, prior_weight=1e6,
                                                                          bin_weight=1e6),
        "markov-dp, one rate for all hours": get_placement_policy("markov-dp", bin_weight=1e6),
        **{name: get_placement_policy(name) for name in POLICIES},
    }
    out = {"regime": regime, "opt": omniscient_cost(case)}
    for name, pol in runs.items():
        r = simulate(pol, case)
        out[name] = (r.cost, not r.met_deadline)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=len(gen.JUDGING_SEEDS),
                    help="second-generator seeds 0 .. N - 1 (12 cases each per regime; default: the judging seeds)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    if args.workers < 1 or args.seeds < 1:
        ap.error("--workers and --seeds must be >= 1")
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(row, tasks(range(args.seeds)), chunksize=4))
    print(f"Second generator (launcher.simulation.synthetic_shifted), seeds 0-{args.seeds - 1}, home zone, capacity "
          f"signal; the first row: the exact online optimum told the zone's law (a lower bound for any online policy)")
    for regime in REGIMES:
        mb.paired_report(regime, [r for r in rows if r["regime"] == regime], YARDSTICK, f"the {YARDSTICK}")
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
