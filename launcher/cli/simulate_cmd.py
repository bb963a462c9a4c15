"""Command: `launcher simulate` (replay spot traces against a placement policy).

Kept light at import: the simulator and policies load inside the command (no pandas at all).
"""

from __future__ import annotations

from pathlib import Path

import typer

from launcher.cli.app import app


@app.command("simulate")
def simulate(
    cases: Path = typer.Option(..., "--cases", help="JSON list of cases (see `launcher simulate --help`)."),
    trace_root: Path | None = typer.Option(
        None, "--trace-root",
        help="Directory the cases' trace paths are relative to (default: the real traces shipped with the package).",
    ),
    policy: str = typer.Option("deadline-aware", "--policy", help="Placement policy name."),
    optimum: bool = typer.Option(
        False, "--optimum", help="Also compute the omniscient optimum per case (exact DP; slower)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per case (JSON lines)."),
    capacity_signal: bool = typer.Option(
        True, "--capacity-signal/--no-capacity-signal",
        help="--no-capacity-signal: show the policy only what a run on a cloud that cannot report spot capacity "
             "(AWS, GCP) sees, probing as the controller does; refused probes are counted.",
    ),
) -> None:
    """Simulate a placement policy on spot availability traces, one result per case.

    A case: {"trace": PATH (or "traces": [PATH, ...] for multi-zone), "start_tick": N,
    "work_hours": H, "deadline_hours": H, "overhead_hours": H, "on_demand_price": USD_PER_HOUR,
    "spot_price": USD_PER_HOUR, optional "history_hours": H}. Single-zone policies given several
    traces run in the first one. `history_hours`: that much of each trace before `start_tick` is
    given to the policy as watched before the run (up and down spells), as the controller gives
    it what other runs saw.
    """
    from launcher.cli.render import print_table
    from launcher.policies.registry import get_placement_policy
    from launcher.simulation.cases import load_cases, run_cases
    from launcher.simulation.samples import SAMPLE_TRACE_ROOT

    pol = get_placement_policy(policy)  # unknown name -> exit 2 with a did-you-mean
    specs = load_cases(cases)
    outcomes = run_cases(specs, trace_root or SAMPLE_TRACE_ROOT, pol, with_optimum=optimum,
                         capacity_signal=capacity_signal)  # fmt: skip
    if as_json:
        import json
        import sys

        for o in outcomes:
            sys.stdout.write(json.dumps(o.to_json()) + "\n")
        return
    cols = ["case", "policy", "cost $", "finished", "met deadline", "hours", "preemptions", "switches", "spot h",
            "on-demand h"]
    if optimum:
        cols.append("optimum $")
    if not capacity_signal:
        cols.append("refused")
    rows = []
    for o in outcomes:
        row = [o.case, o.policy, f"{o.cost:.2f}", o.finished, o.met_deadline, f"{o.hours:.2f}", o.preemptions,
               o.switches, f"{o.spot_hours:.2f}", f"{o.on_demand_hours:.2f}"]
        if optimum:
            row.append("infeasible" if o.omniscient_cost is None else f"{o.omniscient_cost:.2f}")
        if not capacity_signal:
            row.append(o.refused)
        rows.append(row)
    print_table(f"simulate: {pol.name}", cols, rows)
