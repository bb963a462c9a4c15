"""Benchmark the placement policies on the real Can't Be Late spot traces.

    .venv/bin/python bench/bench_policies.py [--trace-root ../shared/data/spot-traces] [--workers 2]

Single-zone: every availability/preemption trace file on its own. Multi-zone: the zones of one
collection and instance type (e.g. the 9 zones of availability/1-node/aws-02-15-2023). For each
trace a grid of jobs: start ticks spread over the trace, 24 h and 48 h of work, deadlines 1.2x,
1.5x and 2x the work, 0.2 h restart overhead, p3.2xlarge prices ($3.06/h on-demand, $0.9731/h
spot). Prints, per policy: mean cost relative to on-demand and to the omniscient optimum (exact DP,
`launcher.simulation.omniscient`), deadline misses, and mean preemptions/switches; breakdowns by
deadline factor and trace collection; and the paper's own setting (2-week traces, 48 h job, tight
job fractions), where Uniform Progress should beat greedy as the paper reports.

About 65 s of CPU in all (two worker processes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launcher.policies.registry import get_placement_policy  # noqa: E402
from launcher.simulation.engine import SimCase, simulate  # noqa: E402
from launcher.simulation.omniscient import omniscient_cost  # noqa: E402
from launcher.simulation.traces import Trace, load_trace  # noqa: E402

OD_PRICE = 3.06
SPOT_PRICE = 0.9731
OVERHEAD_HOURS = 0.2
WORK_HOURS = (24.0, 48.0)
DEADLINE_FACTORS = (1.2, 1.5, 2.0)
SINGLE_POLICIES = ("on-demand", "greedy", "uniform-progress", "deadline-aware")
MULTI_POLICIES = ("multi-zone",)


def discover(root: Path) -> tuple[list[Path], dict[str, list[Path]]]:
    files = sorted(p for p in root.rglob("*.json"))
    groups: dict[str, list[Path]] = defaultdict(list)
    for p in files:
        instance = p.stem.split("_", 1)[1] if "_" in p.stem else ""
        groups[f"{p.parent.relative_to(root)}:{instance}"].append(p)
    return files, {k: v for k, v in sorted(groups.items()) if len(v) > 1}


def starts_for(n_ticks: int, need_ticks: int, n_starts: int) -> list[int]:
    room = n_ticks - need_ticks
    if room < 0:
        return []
    if n_starts == 1:
        return [0]
    return sorted({round(i * room / (n_starts - 1)) for i in range(n_starts)})


def grid(traces: tuple[Trace, ...], n_starts: int) -> list[SimCase]:
    n = min(len(t) for t in traces)
    g = traces[0].gap_hours
    out = []
    for work in WORK_HOURS:
        for f in DEADLINE_FACTORS:
            deadline = work * f
            for s in starts_for(n, int(deadline / g) + 1, n_starts):
                out.append(SimCase(traces, s, work, deadline, OVERHEAD_HOURS, OD_PRICE, SPOT_PRICE))
    return out


def run_case(args: tuple[SimCase, tuple[str, ...], bool]) -> dict:
    case, policies, multi = args
    row = {
        "omniscient": omniscient_cost(case, multi_zone=multi),
        "factor": round(case.deadline_hours / case.work_hours, 2),
        "collection": case.traces[0].name.rsplit("/", 1)[0],
    }
    for name in policies:
        if multi and not get_placement_policy(name).multi_zone:
            # a single-zone policy placed in each zone of the group (the user picks one zone)
            results = [simulate(get_placement_policy(name), SimCase((t,), *_rest(case))) for t in case.traces]
            row[name] = {
                "cost": statistics.fmean(r.cost for r in results),
                "best_zone_cost": min(r.cost for r in results),
                "miss": sum(not r.met_deadline for r in results) / len(results),
                "preemptions": statistics.fmean(r.preemptions for r in results),
                "switches": statistics.fmean(r.switches for r in results),
            }
        else:
            r = simulate(get_placement_policy(name), case)
            row[name] = {"cost": r.cost, "miss": float(not r.met_deadline), "preemptions": r.preemptions,
                         "switches": r.switches}
    return row


def _rest(case: SimCase) -> tuple:
    return (case.start_tick, case.work_hours, case.deadline_hours, case.overhead_hours,
            case.on_demand_price, case.spot_price)


def summarize(title: str, rows: list[dict], policies: tuple[str, ...]) -> dict:
    ref = [r["on-demand"]["cost"] for r in rows]
    opt = [r["omniscient"] for r in rows]
    print(f"\n{title}: {len(rows)} cases")
    print(f"{'policy':<22}{'cost/on-demand':>16}{'cost/omniscient':>17}{'worst/on-demand':>17}{'misses':>8}"
          f"{'preempt':>9}{'switch':>8}")
    out = {}
    for name in (*policies, "omniscient"):
        if name == "omniscient":
            costs = opt
            misses = 0.0
            pre = sw = float("nan")
        else:
            costs = [r[name]["cost"] for r in rows]
            misses = sum(r[name]["miss"] for r in rows)
            pre = statistics.fmean(r[name]["preemptions"] for r in rows)
            sw = statistics.fmean(r[name]["switches"] for r in rows)
        rel_od = statistics.fmean(c / o for c, o in zip(costs, ref))
        rel_opt = statistics.fmean(c / o for c, o in zip(costs, opt))
        worst = max(c / o for c, o in zip(costs, ref))
        out[name] = {"cost_vs_on_demand": rel_od, "cost_vs_omniscient": rel_opt, "worst_vs_on_demand": worst,
                     "misses": misses}
        print(f"{name:<22}{rel_od:>16.4f}{rel_opt:>17.4f}{worst:>17.4f}{misses:>8g}{pre:>9.2f}{sw:>8.2f}")
        if name != "on-demand" and isinstance(rows[0].get(name), dict) and "best_zone_cost" in rows[0][name]:
            bz = [r[name]["best_zone_cost"] for r in rows]
            print(f"{'  ' + name + ' (best zone)':<22}{statistics.fmean(c / o for c, o in zip(bz, ref)):>16.4f}"
                  f"{statistics.fmean(c / o for c, o in zip(bz, opt)):>17.4f}")
            out[name]["best_zone_cost_vs_on_demand"] = statistics.fmean(c / o for c, o in zip(bz, ref))
    return out


def breakdown(rows: list[dict], policies: tuple[str, ...], key: str) -> None:
    """Mean cost relative to on-demand per value of `key` (deadline factor, trace collection)."""
    values = sorted({r[key] for r in rows}, key=str)
    print(f"  by {key}: " + "  ".join(f"{p}" for p in policies if p != "on-demand"))
    for v in values:
        sub = [r for r in rows if r[key] == v]
        cells = []
        for p in (*policies, "omniscient"):
            if p == "on-demand":
                continue
            costs = [r[p] if p == "omniscient" else r[p]["cost"] for r in sub]
            cells.append(f"{statistics.fmean(c / r['on-demand']['cost'] for c, r in zip(costs, sub)):.3f}")
        print(f"    {str(v):<36}{len(sub):>4}  " + "  ".join(cells))


def paper_setting(root: Path, n_starts: int = 10) -> dict:
    """The Can't Be Late evaluation setting: the 2-week (10-minute) availability traces, a 48 h job,
    job fractions C(0)/R(0) from 0.9 down to 0.67, 0.2 h overhead. Mean cost / on-demand."""
    paths = sorted((root / "availability" / "1-node" / "aws-10-26-2022").glob("*.json"))
    if not paths:
        return {}
    traces = [load_trace(p, p.name) for p in paths]
    policies = ("greedy", "uniform-progress", "deadline-aware")
    print(f"\nCan't Be Late setting ({len(traces)} two-week traces, 48 h job, {n_starts} starts each): cost / on-demand")
    print(f"{'job fraction':<14}" + "".join(f"{p:>18}" for p in policies))
    out = {}
    for frac in (0.9, 0.83, 0.75, 0.67):
        deadline = 48.0 / frac
        rel = {p: [] for p in policies}
        for tr in traces:
            for s in starts_for(len(tr), int(deadline / tr.gap_hours) + 1, n_starts):
                case = SimCase((tr,), s, 48.0, deadline, OVERHEAD_HOURS, OD_PRICE, SPOT_PRICE)
                od = simulate(get_placement_policy("on-demand"), case).cost
                for p in policies:
                    rel[p].append(simulate(get_placement_policy(p), case).cost / od)
        out[frac] = {p: statistics.fmean(v) for p, v in rel.items()}
        print(f"{frac:<14}" + "".join(f"{out[frac][p]:>18.4f}" for p in policies))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace-root", type=Path, default=REPO.parent / "shared" / "data" / "spot-traces")
    ap.add_argument("--starts", type=int, default=3, help="start ticks per trace and job shape")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args(argv)
    if not args.trace_root.is_dir():
        print(f"no traces at {args.trace_root}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    files, groups = discover(args.trace_root)
    traces = {p: load_trace(p, str(p.relative_to(args.trace_root))) for p in files}

    single_tasks = [(c, SINGLE_POLICIES, False) for p in files for c in grid((traces[p],), args.starts)]
    multi_policies = ("on-demand", "deadline-aware", *MULTI_POLICIES)
    multi_tasks = [
        (c, multi_policies, True) for ps in groups.values() for c in grid(tuple(traces[p] for p in ps), args.starts)
    ]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        single_rows = list(pool.map(run_case, single_tasks, chunksize=4))
        multi_rows = list(pool.map(run_case, multi_tasks, chunksize=2))
    summary = {"single_zone": summarize(f"Single zone ({len(files)} traces)", single_rows, SINGLE_POLICIES)}
    print("\n  cost / on-demand (columns: the policies, then omniscient)")
    breakdown(single_rows, SINGLE_POLICIES, "factor")
    breakdown(single_rows, SINGLE_POLICIES, "collection")
    summary["multi_zone"] = summarize(
        f"Multi-zone ({len(groups)} groups; single-zone policies: mean over the group's zones)",
        multi_rows,
        multi_policies,
    )
    breakdown(multi_rows, multi_policies, "collection")
    summary["paper_setting"] = paper_setting(args.trace_root)
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
