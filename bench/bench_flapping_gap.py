"""Where `markov-dp`'s loss to greedy on the tuning set's flapping regime comes from.

    .venv/bin/python bench/bench_flapping_gap.py [--seeds 15] [--workers 2]

The tuning generator's flapping spells (`launcher.simulation.synthetic`, 0.3-0.6 h up and down,
lognormal with shape 0.5) are more regular than the memoryless chain `markov-dp` plans on. On its
cases (seeds 0 to `--seeds` - 1, 12 each: home zone, `bench_policies.py`'s job grid, with the capacity
signal; the model bench's tuning set is seeds 0-2 of it, 36 cases) this prints,
per policy, cost / exact optimum (mean, worst) and the paired difference against greedy measured in
the same run (+- its standard error), for a ladder from the best online policy told everything to
`markov-dp` as it runs:

- **optimum told the spell law**: the exact online optimum for the regime's true spell law, age by
  age (the chance that a spell of a given age goes on, per tick, from 200,000 draws of the
  generator's own lognormal, rounded to ticks as it rounds them; one-tick age classes to 24 ticks,
  the last open-ended). It solves `chain_dp` with age classes in its state: the solver of commit
  7523f5c, reverted from the tree (docs/policy-experiments.md, "the spell's age in the plan") and
  loaded here from the repository's history, so this bench needs a clone with history.
- **optimum told the means**: the exact online optimum for a memoryless chain with the zone's true
  mean spells (`launcher.simulation.online_optimum`).
- **markov-dp told the means**: `markov-dp` with its prior at the zone's true means, worth a million
  spells, and no hour-of-day bins: its guards (start margin, slack price) on the right chain.
- **markov-dp, no hour bins**: learning the means, one rate for all hours (`bin_weight` 1e6).
- **markov-dp, prior at the true means, no hour bins**: learning, its prior (worth half a spell) at
  the truth, one rate for all hours.
- **markov-dp, prior at the true means**: the same with the hour-of-day bins.
- **markov-dp**: as it runs.

So the gap splits into what the memoryless form costs (law against means) and what learning costs
(the rest), and says whether any online policy can beat greedy there at all.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import statistics
import subprocess
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_policies as bp  # noqa: E402

from launcher.policies.base import Decision, PlacementPolicy  # noqa: E402
from launcher.policies.registry import get_placement_policy  # noqa: E402
from launcher.simulation import synthetic  # noqa: E402
from launcher.simulation.engine import SimCase, deadline_ticks, overhead_ticks, simulate, work_ticks  # noqa: E402
from launcher.simulation.omniscient import omniscient_cost  # noqa: E402
from launcher.simulation.online_optimum import MarkovSpells, OnlineOptimumPolicy, table_for  # noqa: E402

REGIME = "flapping"
AGES = 24  # one-tick age classes; the last is open-ended
AGE_SOLVER_COMMIT = "7523f5c"  # chain_dp with spell age classes in its state (reverted from the tree)
PEER = "greedy"


@functools.cache
def age_solver() -> types.ModuleType:
    """`chain_dp` as of `AGE_SOLVER_COMMIT`, from the repository's history (read once per process)."""
    try:
        src = subprocess.run(["git", "-C", str(REPO), "show", f"{AGE_SOLVER_COMMIT}:launcher/policies/chain_dp.py"],
                             check=True, capture_output=True, text=True, timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"bench_flapping_gap: needs commit {AGE_SOLVER_COMMIT} in this clone's history "
                         f"(a full clone, not a shallow one): {e}") from None  # fmt: skip
    mod = types.ModuleType("chain_dp_with_ages")
    exec(compile(src, f"{AGE_SOLVER_COMMIT}:chain_dp.py", "exec"), mod.__dict__)
    return mod


@functools.cache
def age_stay_chances(mean_hours: float, sigma: float, gap_hours: float, seed: int, n: int = 200_000) -> np.ndarray:
    """Per age class c (the spell has lasted c + 1 ticks), the chance it lasts one more tick, for
    spells drawn as the tuning generator draws them (lognormal of this mean, rounded to ticks, at
    least one); the last class's from the mean stay of spells that reach it. Cached: a zone's
    cases share it (read only)."""
    rng = random.Random(seed)
    mu = math.log(mean_hours) - sigma * sigma / 2
    ticks = np.array([max(1, round(rng.lognormvariate(mu, sigma) / gap_hours)) for _ in range(n)])
    reach = np.array([(ticks >= a).mean() for a in range(1, AGES + 1)])  # reach[a - 1]: lasts >= a ticks
    out = np.empty(AGES)
    out[:-1] = np.divide(reach[1:], reach[:-1], out=np.zeros(AGES - 1), where=reach[:-1] > 0)
    tail = ticks[ticks >= AGES] - AGES + 1
    out[-1] = 1.0 - 1.0 / tail.mean() if len(tail) else 0.0
    return out


class LawOptimumPolicy(PlacementPolicy):
    """Acts by the exact online optimum for a spell law known age by age (the bench's yardstick)."""

    name = "online optimum, spell law known"

    def __init__(self, solver: types.ModuleType, case: SimCase, up_mean: float, down_mean: float,
                 sigma: float) -> None:  # fmt: skip
        g = case.gap_hours
        W, D = work_ticks(case.work_hours, g), deadline_ticks(case.deadline_hours, g)
        O = overhead_ticks(case.overhead_hours, g)
        up = np.tile(age_stay_chances(up_mean, sigma, g, seed=1), (D, 1))
        down = np.tile(age_stay_chances(down_mean, sigma, g, seed=2), (D, 1))
        self.table = solver.drain(solver.solve_chain(up, down, W, O, case.on_demand_price * g, case.spot_price * g))
        self.g = g
        self.reset()

    def reset(self) -> None:
        self._up: bool | None = None
        self._age = 0

    def decide(self, state) -> Decision:
        up = bool(state.spot_available[0])
        self._age = self._age + 1 if up == self._up else 0
        self._up = up
        g = self.g
        t, p = round(state.elapsed_hours / g), round(state.work_done_hours / g)
        owed = round(state.overhead_remaining_hours / g)
        c = self.table.choose(t, p, state.current, owed, up, min(self._age, AGES - 1))
        return Decision(c, 0, "optimal online policy for the known spell law")


def tasks(seeds: range) -> list[tuple[SimCase, float, float]]:
    out = []
    for seed in seeds:
        traces, means = synthetic.draw(REGIME, zones=3, hours=130.0, seed=seed)
        for c in bp.grid(traces, 2):
            out.append((SimCase(traces[:1], *bp._rest(c)), means[0].up_mean_hours, means[0].down_mean_hours))
    return out


def row(args: tuple[SimCase, float, float]) -> dict:
    case, up, down = args
    sigma = synthetic.regime(REGIME).sigma
    truth = {"prior_up_hours": up, "prior_down_hours": down}
    chain = MarkovSpells.from_mean_hours(up, down, case.gap_hours)
    runs = {
        PEER: get_placement_policy(PEER),
        "deadline-aware": get_placement_policy("deadline-aware"),
        "uniform-progress": get_placement_policy("uniform-progress"),
        "optimum told the spell law": LawOptimumPolicy(age_solver(), case, up, down, sigma),
        "optimum told the means": OnlineOptimumPolicy(table_for(case, chain)),
        "markov-dp told the means": get_placement_policy("markov-dp", **truth, prior_weight=1e6, bin_weight=1e6),
        "markov-dp, no hour bins": get_placement_policy("markov-dp", bin_weight=1e6),
        "markov-dp, prior at the true means, no hour bins": get_placement_policy("markov-dp", **truth, bin_weight=1e6),
        "markov-dp, prior at the true means": get_placement_policy("markov-dp", **truth),
        "markov-dp": get_placement_policy("markov-dp"),
    }
    out = {"opt": omniscient_cost(case)}
    for name, pol in runs.items():
        r = simulate(pol, case)
        out[name] = (r.cost, not r.met_deadline)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=15, help="tuning seeds 0 .. N - 1 (12 cases each)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    if args.workers < 1 or args.seeds < 1:
        ap.error("--workers and --seeds must be >= 1")
    age_solver()  # fails here, before any work, in a clone without the history
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(row, tasks(range(args.seeds))))
    print(f"Tuning generator, {REGIME} regime (seeds 0-{args.seeds - 1}, {len(rows)} cases, home zone, capacity "
          f"signal): cost / exact optimum, mean and worst; paired difference against {PEER} +- standard error")
    peer = [r[PEER][0] / r["opt"] for r in rows]
    for name in (k for k in rows[0] if k != "opt"):
        ratio = [r[name][0] / r["opt"] for r in rows]
        diff = [a - b for a, b in zip(ratio, peer)]
        se = statistics.stdev(diff) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
        misses = sum(r[name][1] for r in rows)
        print(f"{name:<50}{statistics.fmean(ratio):>8.4f}{max(ratio):>8.3f}   {statistics.fmean(diff):+.4f} +- {se:.4f}"
              f"{'' if not misses else f'   {misses} deadline misses'}")
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
