"""What a zone's history buys the learning policies: each case replayed with and without what was seen
of its zones before the job (`SimCase.history_ticks`: up time and preemptions, outages and their
ends, capped at `MAX_SEED_SPELLS` spells a side), as the controller seeds what other runs saw.

    .venv/bin/python bench/bench_zone_history.py [--sets tuning,second,public] [--lead-in-days 7]
        [--workers 2] [--trace-root ../shared/data/spot-traces]

- **tuning**: `launcher.simulation.synthetic`, the model bench's tuning seeds; **second**:
  `launcher.simulation.synthetic_shifted`, its judging seeds. Each trace is generated `--lead-in-days`
  longer and the model bench's job grid (two start ticks, home zone) laid on the part after the
  lead-in: every case has that much of its zone watched before it, as a launcher that ran there last
  week has. Another draw of each regime than the model bench's (a longer trace); where the second
  generator shifts its law (regime-shift, mixed: at 15-60% of the trace) the shift then mostly falls
  in the lead-in, so history describes the regime before it and the plain rows differ from the model
  bench's. `--lead-in-days 0`: the model bench's own cases (home zone), the past before each start
  as history (none for a job that starts at tick 0).
- **public**: the model bench's public cases (home zone); the past is the trace before the case's
  start (the traces are 2-3 days: the first start of each job has none, so about half the cases
  have no history at all).

The cap (`MAX_SEED_SPELLS` = 5) was chosen on the tuning set (2, 5 and 20 tried: -0.0024, -0.0028,
-0.0026, the past alone); the judging sets were not looked at for it. Per set: cost / exact optimum,
mean and worst, paired difference against `markov-dp` without history (+- its standard error), for
`markov-dp` and `deadline-aware`, each with and without the history, and greedy, all in the same
run, with the capacity signal.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_policies as bp  # noqa: E402
import model_policy_bench as mb  # noqa: E402

from launcher.policies.registry import get_placement_policy  # noqa: E402
from launcher.simulation import synthetic, synthetic_shifted  # noqa: E402
from launcher.simulation.engine import SimCase, simulate  # noqa: E402
from launcher.simulation.omniscient import omniscient_cost  # noqa: E402
from launcher.simulation.traces import Trace  # noqa: E402

SETS = ("tuning", "second", "public")
BASE = "markov-dp"
WITH = " + zone history"
ROWS = (("markov-dp", False), ("markov-dp", True), ("deadline-aware", False), ("deadline-aware", True), ("greedy", False))


def synth_cases(module, regimes, seeds, lead_in_hours: float) -> list[tuple[str, SimCase]]:
    """The model bench's job grid on each trace after its lead-in; the lead-in and the ticks before
    the start are the case's history."""
    out = []
    for regime in regimes:
        for seed in seeds:
            traces = module.generate(regime, zones=mb.ZONES, hours=mb.HOURS + lead_in_hours, seed=seed)[:1]
            n = round(lead_in_hours / traces[0].gap_hours)
            after = tuple(Trace(t.name, t.gap_seconds, t.available[n:]) for t in traces)
            for c in bp.grid(after, 2):
                out.append((regime, replace(c, traces=traces, start_tick=c.start_tick + n, history_ticks=c.start_tick + n)))
    return out


def tasks(name: str, lead_in_hours: float, root: Path) -> list[tuple[str, str, SimCase]]:
    if name == "tuning":
        cases = synth_cases(synthetic, bp.REGIMES, mb.TUNE_SEEDS, lead_in_hours)
    elif name == "second":
        cases = synth_cases(synthetic_shifted, synthetic_shifted.REGIMES, synthetic_shifted.JUDGING_SEEDS, lead_in_hours)
    else:
        cases = [(group, SimCase(c.traces[:1], *bp._rest(c), history_ticks=c.start_tick))
                 for c, group, _ in bp.public_tasks(root, 2)]  # fmt: skip
    return [(name, group, case) for group, case in cases]


def row(args: tuple[str, str, SimCase]) -> dict:
    _, group, case = args
    out = {"regime": group, "opt": omniscient_cost(case)}
    for name, history in ROWS:
        r = simulate(get_placement_policy(name), case if history else replace(case, history_ticks=0))
        out[name + (WITH if history else "")] = (r.cost, not r.met_deadline)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)} (default: all)")
    ap.add_argument("--lead-in-days", type=float, default=7.0, help="days watched before the synthetic jobs (default 7)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--trace-root", type=Path, default=REPO.parent / "shared" / "data" / "spot-traces")
    args = ap.parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    bad = [s for s in sets if s not in SETS]
    if bad or not sets:
        ap.error(f"--sets: unknown {', '.join(bad) or '(none given)'}; choose from {', '.join(SETS)}")
    if args.workers < 1 or args.lead_in_days < 0:
        ap.error("--workers must be >= 1 and --lead-in-days >= 0")
    if "public" in sets and not args.trace_root.is_dir():
        ap.error(f"--sets public: no public traces at {args.trace_root} (--trace-root)")
    t0 = time.monotonic()
    work = [t for s in sets for t in tasks(s, args.lead_in_days * 24.0, args.trace_root)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(row, work, chunksize=2))
    print(f"Zone history: each case with and without what was seen of its zone before it (lead-in "
          f"{args.lead_in_days:g} days on the generators; the public traces' past), home zone, capacity signal")
    for s in sets:
        mine = [r for (set_name, _, _), r in zip(work, rows) if set_name == s]
        for group in sorted({r["regime"] for r in mine}):
            mb.paired_report(f"{s}: {group}", [r for r in mine if r["regime"] == group], BASE, BASE, width=34)
        mb.paired_report(f"{s}: all", mine, BASE, BASE, width=34)
    print(f"\nwall time {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
