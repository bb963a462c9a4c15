"""`launcher reproduce RUN [--check]`: relaunch a recorded run from what produced it.

Refused (exit 3, nothing launched) when the code, the environment or the data cannot be what the
run was launched with; see launcher.tracking.reproduce. `--check` exits 0 only when the new
run's `final_weights_sha256` is the recorded one (1 when it differs or is missing).
"""

from __future__ import annotations

import sys

import typer

from launcher.cli.app import GLOBALS, app
from launcher.errors import ExitCode, LauncherError


class WeightsDifferError(LauncherError):
    exit_code = ExitCode.JOB_FAILED


@app.command("reproduce")
def reproduce(
    run: str = typer.Argument(..., help="Run id (or a unique prefix) to reproduce."),
    check: bool = typer.Option(False, "--check", help="Exit 0 only when the new final_weights_sha256 equals the recorded one."),
    cloud: list[str] = typer.Option([], "--cloud", metavar="CLOUD", help="Only these clouds (default: where the recorded run completed)."),
) -> None:
    """Relaunch a recorded run: same spec, code revision, lockfile, seeds and data."""
    from launcher.cli.launch_cmd import _run_foreground
    from launcher.cli.render import info
    from launcher.controller.launch_plan import parse_clouds
    from launcher.controller.runner import LaunchOptions, prepare_run
    from launcher.ledger import Ledger
    from launcher.planning import Overrides, local_offer, make_plan
    from launcher.spec.provenance import collect_provenance
    from launcher.tracking.reproduce import prepare_reproduction, recorded_weights

    with Ledger() as ledger:
        source = prepare_reproduction(ledger, run)
        orig = source.run
        if check and source.recorded_weights is None:
            source.remove()
            raise WeightsDifferError(f"run {orig.run_id} recorded no final_weights_sha256; there is nothing to check against")
        try:
            info(f"reproducing run {orig.run_id}: revision {orig.code_revision[:12]} checked out in {source.worktree}")
            clouds = parse_clouds(cloud) or ((source.cloud,) if source.cloud else None)
            plan = make_plan(source.loaded, overrides=Overrides(clouds=clouds), catalog_dir=GLOBALS.catalog_dir,
                             local_offer=local_offer(simulated=False, simulate_price=None))  # fmt: skip
            plan.budget.enforce()
            prov = collect_provenance(source.loaded)
            new_id = prepare_run(source.loaded, plan, LaunchOptions(), ledger, prov)
            ledger.add_event(new_id, "reproduces", {"run_id": orig.run_id})
            info(f"run {new_id}")
            _run_foreground(new_id, ledger, num_nodes=plan.num_nodes, mode="foreground")
        finally:
            source.remove()
        new_weights = recorded_weights(ledger, new_id)
    same = new_weights is not None and new_weights == source.recorded_weights
    info(f"recorded  final_weights_sha256={source.recorded_weights}")
    info(f"reproduced final_weights_sha256={new_weights}")
    info("identical weights" if same else "weights DIFFER")
    sys.stdout.flush()
    if check and not same:
        raise WeightsDifferError(f"run {new_id} did not reproduce run {orig.run_id}: final weights differ")
