"""Sweep a placement policy's parameters on the tuning draws: the tool behind docs/policy-experiments.md's "tried".

    .venv/bin/python bench/sweep_policies.py multi-zone --set bind_margin=1,2,4 [--set start_margin=1,1.5]
        [--leads 0,24,72] [--public] [--seeds 0-14] [--regimes flapping,scarce] [--holdout] [--workers 2]

Every combination of the `--set` values (keyword parameters of the policy's constructor, e.g.
`prior_up_hours`, `hop_margin`, `bind_margin`; true/false/numbers as JSON) runs on the synthetic
tuning seeds 0-14 (`bench_policies.py`'s grid: 24 h and 48 h jobs due in 1.2x-2x, two start ticks per
trace, 3 zones), at each lead-in hour of `--leads` (another draw of the same seeds; 0 = the first).
Per combination and lead it prints: mean cost / home-zone optimum; the worst ratio, and the cases
above 1.02, against `deadline-aware` with its defaults in the home zone (the issue's per-case bound;
1.0000 and 0 for `deadline-aware`'s own defaults); deadline misses; and the largest amount by which
the policy's mean trails greedy's in any regime (cost / optimum; > 0: greedy ahead there).
`--public` adds the public traces: for `multi-zone` the 9-zone AWS group, each zone as home (mean of
per-case ratios and ratio of totals, against the home-zone optimum); for a single-zone policy every
public trace (mean and worst cost / optimum). `--holdout` runs the hold-out seeds 100-104 instead:
that is judging a change once, not tuning, and the banner says so.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_policies as bp  # noqa: E402

from launcher.errors import LauncherError, UnknownNameError  # noqa: E402
from launcher.policies.registry import get_placement_policy  # noqa: E402
from launcher.simulation.engine import SimCase, simulate  # noqa: E402
from launcher.simulation.omniscient import omniscient_cost  # noqa: E402
from launcher.simulation.synthetic import REGIMES  # noqa: E402
from launcher.simulation.traces import load_trace  # noqa: E402

Config = tuple[tuple[str, object], ...]  # sorted (parameter, value) pairs: picklable and hashable


def _label(cfg: Config) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg) or "(defaults)"


def synth_row(args: tuple[SimCase, str, str, tuple[Config, ...]]) -> dict:
    """One synthetic case: the references once, then every configuration."""
    case, regime, policy, configs = args
    home = SimCase(case.traces[:1], *bp._rest(case))
    multi = get_placement_policy(policy).multi_zone
    row = {
        "regime": regime,
        "opt": omniscient_cost(home),
        "da": simulate(get_placement_policy("deadline-aware"), home).cost,
        "greedy": simulate(get_placement_policy("greedy"), home).cost,
    }
    for cfg in configs:
        r = simulate(get_placement_policy(policy, **dict(cfg)), case if multi else home)
        row[cfg] = (r.cost, not r.met_deadline)
    return row


def public_multi_rows(args: tuple[SimCase, str, tuple[Config, ...]]) -> list[dict]:
    """A public zone group, each zone as home in turn (as in `bench_policies.public_multi_row`)."""
    case, policy, configs = args
    rows = []
    for h in range(len(case.traces)):
        group, home = bp.as_home(case, h)
        row = {"opt": omniscient_cost(home), "da": simulate(get_placement_policy("deadline-aware"), home).cost}
        for cfg in configs:
            row[cfg] = simulate(get_placement_policy(policy, **dict(cfg)), group).cost
        rows.append(row)
    return rows


def public_single_row(args: tuple[SimCase, str, tuple[Config, ...]]) -> dict:
    case, policy, configs = args
    row = {"opt": omniscient_cost(case)}
    for cfg in configs:
        row[cfg] = simulate(get_placement_policy(policy, **dict(cfg)), case).cost
    return row


def synth_table(rows: list[dict], configs: tuple[Config, ...]) -> list[dict]:
    rows = [r for r in rows if r["opt"]]
    out = []
    print(f"{'parameters':<40}{'mean/opt':>10}{'worst/da':>10}{'>1.02':>7}{'misses':>8}{'behind greedy':>15}")
    for cfg in configs:
        ratios = [r[cfg][0] / r["da"] for r in rows]
        worst = max(range(len(rows)), key=lambda i: ratios[i])
        gaps = {}
        for regime in {r["regime"] for r in rows}:
            sub = [r for r in rows if r["regime"] == regime]
            gaps[regime] = statistics.fmean(r[cfg][0] / r["opt"] for r in sub) - statistics.fmean(
                r["greedy"] / r["opt"] for r in sub)
        behind = max(gaps, key=gaps.get)
        o = {"parameters": dict(cfg), "mean_vs_optimum": statistics.fmean(r[cfg][0] / r["opt"] for r in rows),
             "worst_vs_deadline_aware": ratios[worst], "worst_regime": rows[worst]["regime"],
             "over_1_02": sum(x > 1.02 for x in ratios), "misses": sum(r[cfg][1] for r in rows),
             "behind_greedy": gaps[behind], "behind_greedy_regime": behind}
        out.append(o)
        print(f"{_label(cfg):<40}{o['mean_vs_optimum']:>10.4f}{o['worst_vs_deadline_aware']:>10.4f}{o['over_1_02']:>7d}"
              f"{o['misses']:>8d}{o['behind_greedy']:>+15.4f}  worst in {o['worst_regime']}, greedy closest in {behind}")
    return out


def parameter_names(policy: object) -> set[str]:
    """Keyword parameters the policy's constructors take (subclasses pass the rest on as **params)."""
    out = set()
    for cls in type(policy).__mro__:
        init = cls.__dict__.get("__init__")
        if init is not None:
            out |= {p.name for p in inspect.signature(init).parameters.values()
                    if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"}
    return out


def parse_set(text: str) -> tuple[str, list[object]]:
    name, sep, values = text.partition("=")
    if not sep or not name or not values:
        raise argparse.ArgumentTypeError(f"--set wants NAME=V1[,V2...], got {text!r}")
    out = []
    for v in values.split(","):
        try:
            out.append(json.loads(v))
        except json.JSONDecodeError:
            out.append(v)
    return name.strip(), out


def parse_seeds(text: str) -> tuple[int, ...]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            seeds = tuple(range(lo, hi + 1))
        else:
            seeds = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds wants A-B or A,B,C (integers), got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"--seeds {text!r} names no seed")
    return seeds


def parse_leads(text: str) -> tuple[float, ...]:
    try:
        leads = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--leads wants hours like 0,24,72, got {text!r}") from None
    if not all(0 <= x <= 24 * 365 for x in leads):
        raise argparse.ArgumentTypeError("--leads: each lead-in must be between 0 and 8760 hours")
    return leads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policy", help="a placement policy name, e.g. deadline-aware or multi-zone")
    ap.add_argument("--set", dest="sets", type=parse_set, action="append", default=[], metavar="NAME=V1,V2",
                    help="a constructor parameter and the values to try (repeatable; every combination runs)")
    ap.add_argument("--leads", type=parse_leads, default=(0.0,), help="lead-in hours of the draws (default 0)")
    ap.add_argument("--seeds", type=parse_seeds, default=None, help="synthetic seeds (default: the tuning set 0-14)")
    ap.add_argument("--regimes", default=",".join(REGIMES), help="comma-separated regimes (default: all)")
    ap.add_argument("--holdout", action="store_true", help="the hold-out seeds 100-104: judging, not tuning")
    ap.add_argument("--public", action="store_true", help="also the public traces (--trace-root)")
    ap.add_argument("--trace-root", type=Path, default=REPO.parent / "shared" / "data" / "spot-traces")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", type=Path, help="also write the tables here")
    args = ap.parse_args(argv)
    if args.holdout and args.seeds is not None:
        ap.error("--holdout and --seeds both choose the seeds: give one")
    regimes = [r.strip() for r in args.regimes.split(",") if r.strip()]
    for r in regimes:
        if r not in REGIMES:
            ap.error(str(UnknownNameError("regime", r, REGIMES)))
    if args.workers < 1:
        ap.error("--workers must be >= 1")
    names = [n for n, _ in args.sets]
    if len(set(names)) != len(names):
        ap.error("each --set parameter may be given once (list its values after one =)")
    configs = tuple(tuple(sorted(zip(names, combo))) for combo in itertools.product(*(v for _, v in args.sets)))
    try:
        policy = get_placement_policy(args.policy)
        multi = policy.multi_zone
        for name in names:
            if name not in parameter_names(policy):
                raise UnknownNameError(f"parameter of {args.policy}", name, parameter_names(policy))
        for cfg in configs:  # bad names or values fail here, before any case runs
            get_placement_policy(args.policy, **dict(cfg))
    except LauncherError as e:
        ap.error(str(e))
    seeds = bp.HOLDOUT_SEEDS if args.holdout else (args.seeds or bp.TUNE_SEEDS)
    kind = "HOLD-OUT seeds: judging a change, not tuning" if args.holdout else "tuning seeds"
    summary: dict = {"policy": args.policy, "seeds": list(seeds), "draws": {}}
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for lead in args.leads:
            tasks = [(c, r, args.policy, configs) for c, r in bp.synth_tasks(seeds, 2, lead) if r in regimes]
            rows = list(pool.map(synth_row, tasks, chunksize=8))
            print(f"\n{args.policy}, {kind} {seeds[0]}-{seeds[-1]}, lead-in {lead:g} h, {len(tasks)} cases "
                  f"({', '.join(regimes)}); mean/opt is against the {'home-zone ' if multi else ''}optimum")
            summary["draws"][str(lead)] = synth_table(rows, configs)
        if args.public and args.trace_root.is_dir():
            files, groups = bp.discover(args.trace_root)
            traces = {p: load_trace(p, str(p.relative_to(args.trace_root))) for p in files}
            if multi:
                nine = [ps for ps in groups.values() if len(ps) >= 9]
                cases = [c for ps in nine for c in bp.grid(tuple(traces[p] for p in ps), 3)]
                rows = [r for rs in pool.map(public_multi_rows, [(c, args.policy, configs) for c in cases]) for r in rs]
                rows = [r for r in rows if r["opt"]]
                print(f"\npublic 9-zone group, each zone as home ({len(rows)} cases): cost / home-zone optimum")
                print(f"{'parameters':<40}{'per-case':>10}{'totals':>10}{'worst/da':>10}")
                summary["public"] = []
                for cfg in configs:
                    o = {"parameters": dict(cfg),
                         "per_case": statistics.fmean(r[cfg] / r["opt"] for r in rows),
                         "totals": sum(r[cfg] for r in rows) / sum(r["opt"] for r in rows),
                         "worst_vs_deadline_aware": max(r[cfg] / r["da"] for r in rows)}
                    summary["public"].append(o)
                    print(f"{_label(cfg):<40}{o['per_case']:>10.4f}{o['totals']:>10.4f}{o['worst_vs_deadline_aware']:>10.4f}")
            else:
                cases = [c for p in files for c in bp.grid((traces[p],), 3)]
                rows = [r for r in pool.map(public_single_row, [(c, args.policy, configs) for c in cases], chunksize=4)
                        if r["opt"]]
                print(f"\npublic traces, single zone ({len(rows)} cases): cost / optimum")
                print(f"{'parameters':<40}{'mean':>10}{'worst':>10}")
                summary["public"] = []
                for cfg in configs:
                    ratios = [r[cfg] / r["opt"] for r in rows]
                    summary["public"].append({"parameters": dict(cfg), "mean": statistics.fmean(ratios),
                                              "worst": max(ratios)})
                    print(f"{_label(cfg):<40}{statistics.fmean(ratios):>10.4f}{max(ratios):>10.4f}")
        elif args.public:
            print(f"\nno public traces at {args.trace_root}", file=sys.stderr)
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
