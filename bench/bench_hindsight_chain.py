"""What perfect estimation within `markov-dp`'s model class buys, on the second generator's five regimes.

    .venv/bin/python bench/bench_hindsight_chain.py [--seeds 6] [--ages 24] [--workers 2]
        [--public [--trace-root ../shared/data/spot-traces]]

`markov-dp` plans on a two-state memoryless chain that it estimates as it runs. How much of its gap to
the exact optimum is the estimate, and how much the model class? Each case is replayed by the exact
plan told, with hindsight, what zone 0's trace realizes:

- **the window's realized chain**: the chance that capacity up (down) at one tick is up (down) at
  the next, counted over the case's window (start to deadline; half a count of each kind added, so
  a window without a change is not read as certain): the best estimate of the model `markov-dp`
  plans on, its plan exact (`online_optimum`);
- **the trace's realized chain**: the same counted over the whole trace (130 h);
- **the trace's realized spell law, down spells by age**: the chance that a down spell that has
  lasted a ticks goes on, for a = 1 .. `--ages` (the last class open-ended), from the trace's
  whole down spells (the first and the last, cut by the trace's ends, left out), up spells
  memoryless: a chain over 1 + `--ages` states, up or down of each age, solved exactly by
  `launcher.simulation.labelled_chain_optimum` and read off the trace (also told when the spell
  running at the case's start began). What a model of the outage's age, learnt perfectly, buys.

None of these is a lower bound for online policies: each is told an average the trace realizes,
not the law that drew it, and where the law changes in time (a daily cycle, a shift) a local
estimate can do better than the window's average (`markov-dp` does in regime-shift). What they
bound is the model class: a memoryless two-state plan, or one with the outage's age, however well
estimated. Where the law itself is known (daily-weekly, regime-shift), `bench_judging_bound.py`
solves the online optimum told it.

For each regime, on its judging draws (seeds 0 to `--seeds` - 1, `bench_policies.py`'s job grid with
two start ticks, home zone, the capacity signal: 72 cases per regime with the default 6 seeds), this
prints per policy cost / exact optimum (mean, worst, cases above 1.05, misses) and the paired
difference against `markov-dp` (+- its standard error), measured in the same run: the three rows
above, `markov-dp` told the window's realized chain (its prior at the window's mean spells, worth a
million spells, one rate for all hours: what its guards cost on the chain it is told), `markov-dp`
as it runs, `deadline-aware`, greedy and uniform progress; then each row's mean over the five
regimes, the figure the goal's mean line reads. `--public` does the same on the public traces (the
model bench's 376 cases, by collection, then all), without the age row (their ticks of 0.5-10 min
make its solve minutes per case).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
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

WINDOW = "optimum told the window's realized chain"
TRACE = "optimum told the trace's realized chain"
AGES = "optimum told the trace's down spells by age"
TOLD = "markov-dp told the window's realized chain"
BASE = "markov-dp"
POLICIES = ("markov-dp", "deadline-aware", "greedy", "uniform-progress")


def realized_chain(available: tuple[bool, ...]) -> MarkovSpells:
    """The chance that capacity up (down) at a tick is up (down) at the next, counted over
    `available`, with half a count of staying and half of changing added to each."""
    a = np.asarray(available, dtype=bool)
    now, nxt = a[:-1], a[1:]
    up_stays, up_ends = np.sum(now & nxt), np.sum(now & ~nxt)
    down_stays, down_ends = np.sum(~now & ~nxt), np.sum(~now & nxt)
    return MarkovSpells(float((up_stays + 0.5) / (up_stays + up_ends + 1.0)),
                        float((down_stays + 0.5) / (down_stays + down_ends + 1.0)))  # fmt: skip


def whole_spells(available: tuple[bool, ...], up: bool) -> list[int]:
    """Lengths in ticks of the spells of `available` in state `up`, but the first and the last
    (cut by the trace's ends)."""
    starts = [i for i in range(1, len(available)) if available[i] != available[i - 1]]
    return [e - b for b, e in zip(starts, starts[1:]) if available[b] == up]


def age_stays(lengths: list[int], classes: int) -> np.ndarray:
    """Per age class c (the spell has lasted c + 1 ticks; c < classes - 1), the share of spells that
    lasted c + 1 ticks that lasted one more; the last class, open-ended, goes on with the chance whose
    mean stay is that of the spells that reach it. 0 where no spell reached the class."""
    ticks = np.asarray(lengths, dtype=float)
    reach = np.array([(ticks >= a).sum() for a in range(1, classes + 1)], dtype=float)  # lasted >= a ticks
    out = np.zeros(classes)
    out[:-1] = np.divide([(ticks >= a + 1).sum() for a in range(1, classes)], reach[:-1],
                         out=np.zeros(classes - 1), where=reach[:-1] > 0)  # fmt: skip
    tail = ticks[ticks >= classes] - classes + 1
    out[-1] = 1.0 - 1.0 / tail.mean() if len(tail) else 0.0
    return out


def age_chain(up_stays: float, down_stays: np.ndarray, n: int) -> LabelledChain:
    """State 0: capacity up (memoryless); state 1 + c: down, age class c. Up ends into down age 0;
    a down spell in class c goes on into class c + 1 (the last class into itself) or ends into up."""
    A = len(down_stays)
    step = np.zeros((1 + A, 1 + A))
    step[0, 0], step[0, 1] = up_stays, 1.0 - up_stays
    for c in range(A):
        step[1 + c, 1 + min(c + 1, A - 1)] += down_stays[c]
        step[1 + c, 0] += 1.0 - down_stays[c]
    return LabelledChain(np.broadcast_to(step, (n, 1 + A, 1 + A)), np.arange(1 + A) == 0)


def age_states(available: tuple[bool, ...], classes: int) -> np.ndarray:
    """Each tick's state in `age_chain`'s numbering, read off the trace."""
    out = np.zeros(len(available), dtype=np.int64)
    age = 0
    for i, up in enumerate(available):
        age = age + 1 if i and up == available[i - 1] else 0
        out[i] = 0 if up else 1 + min(age, classes - 1)
    return out


def tasks(seeds: range, classes: int) -> list[tuple[str, SimCase, int]]:
    """The second generator's cases per regime and seed, home zone, with the age row's classes."""
    out = []
    for regime in gen.REGIMES:
        for seed in seeds:
            traces = gen.generate(regime, zones=mb.ZONES, hours=mb.HOURS, seed=seed)
            out += [(regime, SimCase(traces[:1], *bp._rest(c)), classes) for c in bp.grid(traces, 2)]
    return out


def public_tasks(root: Path) -> list[tuple[str, SimCase, int]]:
    """The model bench's public cases, home zone, no age row (0 classes)."""
    return [(group, SimCase(c.traces[:1], *bp._rest(c)), 0) for c, group, _ in bp.public_tasks(root, 2)]


def row(args: tuple[str, SimCase, int]) -> dict:
    """One case's bills; `classes` 0: no age row."""
    regime, case, classes = args
    trace = case.traces[0].available
    s, D = case.start_tick, deadline_ticks(case.deadline_hours, case.gap_hours)
    window = realized_chain(trace[s : s + D + 1])
    whole = realized_chain(trace)
    g = case.gap_hours
    runs: dict[str, PlacementPolicy] = {WINDOW: OnlineOptimumPolicy(table_for(case, window)),
                                        TRACE: OnlineOptimumPolicy(table_for(case, whole))}  # fmt: skip
    if classes:
        ups = whole_spells(trace, True)
        up_stays = 1.0 - 1.0 / statistics.fmean(ups) if ups else whole.p_up_stays
        chain = age_chain(up_stays, age_stays(whole_spells(trace, False), classes), D)
        states = age_states(trace + (False,) * 8, classes)  # the simulator reads past the trace as down
        runs[AGES] = LabelledChainOptimumPolicy(labelled_table_for(case, chain), lambda t, st=states: int(st[s + t]))
    runs |= {
        TOLD: get_placement_policy("markov-dp", prior_up_hours=g / (1.0 - window.p_up_stays),
                                   prior_down_hours=g / (1.0 - window.p_down_stays), prior_weight=1e6,
                                   bin_weight=1e6),  # fmt: skip
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
    ap.add_argument("--ages", type=int, default=24, help="one-tick age classes of a down spell (default 24)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--public", action="store_true", help="the public traces instead of the second generator")
    ap.add_argument("--trace-root", type=Path, default=REPO.parent / "shared" / "data" / "spot-traces")
    args = ap.parse_args(argv)
    if args.workers < 1 or args.seeds < 1 or args.ages < 2:
        ap.error("--workers and --seeds must be >= 1, --ages >= 2")
    if args.public and not args.trace_root.is_dir():
        ap.error(f"--public: no public traces at {args.trace_root} (--trace-root)")
    t0 = time.monotonic()
    work = public_tasks(args.trace_root) if args.public else tasks(range(args.seeds), args.ages)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(row, work, chunksize=1 if args.public else 2))
    if args.public:
        print(f"Public traces ({args.trace_root}), the model bench's cases, home zone, capacity signal; rows told "
              "with hindsight what the trace realizes (not lower bounds: see the docstring)")  # fmt: skip
    else:
        print(f"Second generator (launcher.simulation.synthetic_shifted), seeds 0-{args.seeds - 1}, home zone, "
              "capacity signal; rows told with hindsight what zone 0's trace realizes (not lower bounds: see the "
              "docstring)")  # fmt: skip
    for group in sorted({r["regime"] for r in rows}, key=lambda k: (k not in gen.REGIMES, k)):
        mb.paired_report(group, [r for r in rows if r["regime"] == group], BASE, BASE, width=46)
    mb.paired_report("all public traces" if args.public else "all five regimes", rows, BASE, BASE, width=46)
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
