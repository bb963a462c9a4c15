"""The model-based policies (`markov-dp`, `expected-cost`) against the simple policies, tuning set and
judging sets kept apart
(`bench_policies.py --model` runs it; `bench_policies.py` alone runs it after the older tables).

- **Tuning set**: `launcher.simulation.synthetic` (the generator the policies' parameters were chosen on).
- **Judging sets**: the public Can't Be Late traces (no generator made them) and
  `launcher.simulation.synthetic_shifted` (a second generator of different structure, frozen before
  tuning, seeds `JUDGING_SEEDS`, never tuned on).

Per set and regime (collection, for the public traces): single-zone cost / exact optimum, mean and
worst, and deadline misses for greedy, uniform progress, deadline-aware, expected-cost and markov-dp,
measured in the same run; each multi-zone policy (3 zones, the public zone groups) against its
single-zone twin in the home zone, worst per case: `markov-dp-multi-zone` against `markov-dp` (the
goal line's pair) and `expected-cost-multi-zone` against `expected-cost`; the time per decision of
markov-dp; and the issue's goal lines, each PASS or FAIL, for each judging set.
"""

from __future__ import annotations

import math
import statistics
import time

from launcher.policies.base import PlacementPolicy
from launcher.policies.registry import get_placement_policy
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.omniscient import omniscient_cost

POLICIES = ("greedy", "uniform-progress", "deadline-aware", "expected-cost", "markov-dp")
MODEL = "markov-dp"  # the goal lines and the speed figures are this policy's
# Multi-zone policies and their single-zone twins; the first pair is the goal line's.
MULTI_PAIRS = (("markov-dp-multi-zone", "markov-dp"), ("expected-cost-multi-zone", "expected-cost"))
MULTI = MULTI_PAIRS[0][0]
ZONES = 3
HOURS = 130.0
TUNE_SEEDS = (0, 1, 2)
BEST = "best of 5"  # per case, the cheapest of POLICIES: a ceiling for any choice among them


class Timed(PlacementPolicy):
    """A policy whose decisions are timed: wall clock (perf_counter) and this thread's CPU time
    (thread_time: what the decision computed, without the time another process had the core)."""

    def __init__(self, inner: PlacementPolicy) -> None:
        self.inner, self.name, self.multi_zone = inner, inner.name, inner.multi_zone
        self.seconds, self.calls, self.worst, self.worst_cpu = 0.0, 0, 0.0, 0.0
        self.over_20ms = 0  # decisions slower than the 20 ms

    def reset(self) -> None:
        self.inner.reset()

    def decide(self, state):
        c0, t0 = time.thread_time(), time.perf_counter()
        d = self.inner.decide(state)
        dt, dc = time.perf_counter() - t0, time.thread_time() - c0
        self.seconds += dt
        self.calls += 1
        self.worst = max(self.worst, dt)
        self.worst_cpu = max(self.worst_cpu, dc)
        self.over_20ms += dt >= 0.020
        return d


def _rest(case: SimCase) -> tuple:
    return (case.start_tick, case.work_hours, case.deadline_hours, case.overhead_hours, case.on_demand_price,
            case.spot_price)  # fmt: skip


def row(args: tuple[SimCase, str, bool]) -> dict:
    """One case: every single-zone policy in the home zone (zone 0); with `multi`, also the
    multi-zone policy over all zones."""
    case, group, multi = args
    home = SimCase(case.traces[:1], *_rest(case))
    out: dict = {"group": group, "opt": omniscient_cost(home)}
    for name in POLICIES:
        pol = Timed(get_placement_policy(name))
        t0 = time.perf_counter()
        r = simulate(pol, home)
        out[name] = (r.cost, not r.met_deadline)
        if name == MODEL:
            out["case_s"] = time.perf_counter() - t0
            out["decide_s"], out["decisions"], out["worst_decide_s"] = pol.seconds, pol.calls, pol.worst
            out["over_20ms"] = pol.over_20ms
    if multi and len(case.traces) > 1:
        for name, _ in MULTI_PAIRS:
            r = simulate(get_placement_policy(name), case)
            out[name] = (r.cost, not r.met_deadline)
    return out


def synth_tasks(module, regimes, seeds, grid) -> list[tuple[SimCase, str, bool]]:
    out = []
    for regime in regimes:
        for seed in seeds:
            traces = module.generate(regime, zones=ZONES, hours=HOURS, seed=seed)
            out += [(c, regime, True) for c in grid(traces)]
    return out


def table(title: str, rows: list[dict]) -> dict:
    """Per group: cost / optimum (mean, worst, misses) per policy; multi-zone against its
    single-zone twin; returns the figures the goals read."""
    groups = sorted({r["group"] for r in rows})
    print(f"\n{title}: cost / exact optimum, mean  worst  misses")
    print(f"{'regime':<30}{'cases':>6}" + "".join(f"{p:>26}" for p in (*POLICIES, BEST))
          + "".join(f"{m.removesuffix('-multi-zone') + ' mz/1 mean worst':>32}" for m, _ in MULTI_PAIRS))
    out: dict = {}
    for g in (*groups, "all"):
        sub = [r for r in rows if g in ("all", r["group"]) and r["opt"]]
        if not sub:
            continue
        o: dict = {}
        cells = []
        for p in POLICIES:
            ratios = [r[p][0] / r["opt"] for r in sub]
            o[p] = {"mean": statistics.fmean(ratios), "worst": max(ratios), "misses": sum(r[p][1] for r in sub)}
            cells.append(f"{o[p]['mean']:>9.3f} {o[p]['worst']:>7.3f} {o[p]['misses']:>4d}    ")
        best = [min(r[p][0] for p in POLICIES) / r["opt"] for r in sub]
        o[BEST] = {"mean": statistics.fmean(best), "worst": max(best)}
        cells.append(f"{o[BEST]['mean']:>9.3f} {o[BEST]['worst']:>7.3f}         ")
        for multi, single in MULTI_PAIRS:
            mz = [r[multi][0] / r[single][0] for r in sub if multi in r]
            if mz:
                o[multi] = {"worst_vs_single": max(mz), "over_1_02": sum(x > 1.02 for x in mz),
                            "mean_vs_single": statistics.fmean(mz),
                            "misses": sum(r[multi][1] for r in sub if multi in r), "cases": len(mz)}
                cell = f"{o[multi]['mean_vs_single']:.3f} {max(mz):.3f} ({o[multi]['over_1_02']} > 1.02)"
                cells.append(f"{cell:>32}")
        out[g] = o
        print(f"{g:<30}{len(sub):>6}" + "".join(f"{c:>26}" for c in cells))
    return out


def paired_report(title: str, rows: list[dict], base: str, against: str, width: int = 44) -> None:
    """Per row key of `rows` (each a case: {"opt": exact optimum, key: (cost, missed), ...}): cost /
    optimum mean and worst, the paired difference against key `base` (named `against` in the header)
    +- its standard error, cases above 1.05 and deadline misses; keys padded to `width`."""
    print(f"\n{title} ({len(rows)} cases): cost / exact optimum, mean  worst; paired difference against {against} "
          "+- standard error")  # fmt: skip
    ref = [r[base][0] / r["opt"] for r in rows]
    for key in (k for k in rows[0] if k not in ("regime", "opt")):
        ratio = [r[key][0] / r["opt"] for r in rows]
        diff = [a - b for a, b in zip(ratio, ref)]
        se = statistics.stdev(diff) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
        misses = sum(r[key][1] for r in rows)
        above = sum(x > 1.05 for x in ratio)
        print(f"  {key:<{width}}{statistics.fmean(ratio):>8.4f}{max(ratio):>8.3f}   {statistics.fmean(diff):+.4f} +- "
              f"{se:.4f}   {above:>3} cases > 1.05{'' if not misses else f'   {misses} deadline misses'}")  # fmt: skip


def speed(rows: list[dict]) -> dict:
    """The timed decisions of the parallel tables (two workers sharing the cores)."""
    n = sum(r["decisions"] for r in rows)
    s = sum(r["decide_s"] for r in rows)
    worst = max(r["worst_decide_s"] for r in rows)
    per80 = statistics.fmean(r["case_s"] for r in rows) * 80
    slow = sum(r["over_20ms"] for r in rows)
    return {"ms_per_decision": 1000 * s / n, "worst_ms": 1000 * worst, "seconds_per_80_cases": per80, "decisions": n,
            "decisions_over_20ms": slow}


def quiet_speed(tasks: list[tuple[SimCase, str, bool]], n_single: int = 80, n_multi: int = 24) -> dict:
    """Speed on its own: `n_single` cases spread evenly over `tasks` replayed by `MODEL` in the home
    zone, then `n_multi` multi-zone cases by `MULTI`, one case at a time in this process, nothing
    else of the bench running. Per policy: the wall time of the replays, and per decision the mean,
    the slowest by wall clock and by CPU time, and how many took 20 ms or more."""
    def spread(items: list, n: int) -> list:
        return [items[round(i * (len(items) - 1) / max(1, n - 1))] for i in range(min(n, len(items)))]

    singles = spread([SimCase(c.traces[:1], *_rest(c)) for c, _, _ in tasks], n_single)
    multis = spread([c for c, _, multi in tasks if multi and len(c.traces) > 1], n_multi)
    out = {}
    for name, cases in ((MODEL, singles), (MULTI, multis)):
        if not cases:
            continue
        wall = 0.0
        calls = slow = 0
        decide_s = worst = worst_cpu = 0.0
        for c in cases:
            pol = Timed(get_placement_policy(name))
            t0 = time.perf_counter()
            simulate(pol, c)
            wall += time.perf_counter() - t0
            calls, slow, decide_s = calls + pol.calls, slow + pol.over_20ms, decide_s + pol.seconds
            worst, worst_cpu = max(worst, pol.worst), max(worst_cpu, pol.worst_cpu)
        out[name] = {"cases": len(cases), "replay_s": wall, "seconds_per_80_cases": wall * 80 / len(cases),
                     "decisions": calls, "ms_per_decision": 1000 * decide_s / calls, "worst_ms": 1000 * worst,
                     "worst_cpu_ms": 1000 * worst_cpu, "decisions_over_20ms": slow}
    return out


def goals(name: str, figs: dict) -> list[tuple[str, bool, str]]:
    a = figs["all"]
    m = a[MODEL]
    behind = []
    for g, v in figs.items():
        if g == "all":
            continue
        best = min(v["greedy"]["mean"], v["uniform-progress"]["mean"])
        if v[MODEL]["mean"] > best * 1.005:
            behind.append(f"{g} ({MODEL} {v[MODEL]['mean']:.3f}, greedy {v['greedy']['mean']:.3f}, "
                          f"uniform-progress {v['uniform-progress']['mean']:.3f})")
    ref = f"(greedy {a['greedy']['mean']:.3f} / {a['greedy']['worst']:.3f}, uniform-progress " \
          f"{a['uniform-progress']['mean']:.3f} / {a['uniform-progress']['worst']:.3f}, deadline-aware " \
          f"{a['deadline-aware']['mean']:.3f} / {a['deadline-aware']['worst']:.3f})"
    out = [
        (f"[{name}] mean <= 1.05x optimum", m["mean"] <= 1.05, f"{m['mean']:.3f} {ref}"),
        (f"[{name}] worst <= 1.3x optimum", m["worst"] <= 1.3,
         f"{m['worst']:.3f} (best of 5 per case: mean {a[BEST]['mean']:.3f}, worst {a[BEST]['worst']:.3f})"),
        (f"[{name}] 0 deadline misses", m["misses"] == 0 and a.get(MULTI, {}).get("misses", 0) == 0,
         f"single {m['misses']}, multi-zone {a.get(MULTI, {}).get('misses', 0)}"),
        (f"[{name}] no regime where uniform progress or greedy is cheaper by > 0.5%", not behind, "; ".join(behind)),
    ]
    if MULTI in a:
        w = a[MULTI]["worst_vs_single"]
        out.append((f"[{name}] multi-zone never > 2% dearer than single-zone (any case)", w <= 1.02,
                    f"{MULTI} / {MODEL}: worst {w:.3f}, {a[MULTI]['over_1_02']} of {a[MULTI]['cases']} cases above "
                    f"1.02, mean {a[MULTI]['mean_vs_single']:.3f}"))
    return out
