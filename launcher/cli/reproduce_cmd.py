"""`launcher reproduce RUN [--check]`: relaunch a recorded run from what produced it.

Refused (exit 3, nothing launched) when the code, the environment or the data cannot be what the
run was launched with; see launcher.tracking.reproduce. An environment that differs is shown as
one table (package, recorded, here). `--make-env DIR` then builds a venv with exactly the recorded
distributions (launcher.tracking.make_env) and runs this same command with DIR's python.
`--check` exits 0 only when the new run's `final_weights_sha256` is the recorded one (1 when it
differs or is missing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    make_env: Path | None = typer.Option(
        None, "--make-env", metavar="DIR",
        help="When this environment differs from the run's: build a venv in DIR with exactly the recorded versions (uv or pip) and reproduce from there.",
    ),
    make_env_timeout: float = typer.Option(1800.0, "--make-env-timeout", metavar="SECONDS", help="Give up building the environment after this long."),
) -> None:
    """Relaunch a recorded run: same spec, code revision, environment, lockfile, seeds and data."""
    from launcher.cli.launch_cmd import _run_foreground
    from launcher.cli.render import info
    from launcher.controller.launch_plan import check_local_image, parse_clouds
    from launcher.controller.runner import LaunchOptions, prepare_run
    from launcher.ledger import Ledger
    from launcher.planning import Overrides, local_offer, make_plan
    from launcher.spec.provenance import collect_provenance
    from launcher.tracking.reproduce import EnvironmentDiffersError, prepare_reproduction, recorded_weights

    with Ledger() as ledger:
        try:
            source = prepare_reproduction(ledger, run)
        except EnvironmentDiffersError as e:
            show_differences(e)
            if make_env is None:
                raise
            code = _reproduce_in_new_env(ledger, e.run_id, make_env, make_env_timeout, check=check, cloud=cloud)
            raise typer.Exit(code) from None
        orig = source.run
        if source.moved:
            show_differences(EnvironmentDiffersError(orig.run_id, list(source.moved)), title="editable installs whose source moved on since the run (shown, not refused: --check compares the weights)")
        if check and source.recorded_weights is None:
            source.remove()
            raise WeightsDifferError(f"run {orig.run_id} recorded no final_weights_sha256; there is nothing to check against")
        try:
            info(f"reproducing run {orig.run_id}: revision {orig.code_revision[:12]} checked out in {source.worktree}")
            clouds = parse_clouds(cloud) or ((source.cloud,) if source.cloud else None)
            plan = make_plan(source.loaded, overrides=Overrides(clouds=clouds), catalog_dir=GLOBALS.catalog_dir,
                             local_offer=local_offer(simulated=False, simulate_price=None))  # fmt: skip
            plan.budget.enforce()
            check_local_image(source.loaded, plan)  # a container runtime that cannot start the image: one error now
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


def show_differences(e, *, title: str | None = None) -> None:
    """The environment differences as one table on stderr."""
    from rich.console import Console
    from rich.table import Table

    from launcher.cli.render import _width

    table = Table(title=title or f"environment: run {e.run_id} vs here ({len(e.differences)} differences)")
    for col in ("package", "recorded", "here"):
        table.add_column(col, overflow="fold")
    for d in e.differences:
        table.add_row(d.name, d.recorded or "-", d.here or "-")
    Console(file=sys.stderr, width=_width(sys.stderr)).print(table)


def _reproduce_in_new_env(ledger, run_id: str, dest: Path, timeout_s: float, *, check: bool, cloud: list[str]) -> int:
    """Build the recorded environment in `dest`, then run this reproduction with its python."""
    from launcher.cli.render import info
    from launcher.errors import BadInputError
    from launcher.tracking.lineage import LINEAGE_EVENT, recorded_environment
    from launcher.tracking.make_env import build_env

    recorded = recorded_environment(ledger, run_id)
    lineage = next((ev.data for ev in reversed(ledger.events(run_id, kind=LINEAGE_EVENT))), {})
    own = Path(lineage["git_root"]) if lineage.get("git_root") else None
    python = build_env(recorded, dest, timeout_s=timeout_s, progress=info, own_source=own)
    probe = subprocess.run([str(python), "-c", "import launcher"], capture_output=True, timeout=120, env=_child_env())
    if probe.returncode != 0:
        raise BadInputError(f"the environment of run {run_id} (built in {dest}) has no launcher to reproduce it with")
    argv = [str(python), "-m", "launcher.cli.main", *(["--debug"] if "--debug" in sys.argv else []), "reproduce", run_id]
    argv += ["--check"] if check else []
    for c in cloud:
        argv += ["--cloud", c]
    info(f"reproducing run {run_id} with {python}")
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run(argv, env=_child_env()).returncode


def _child_env() -> dict[str, str]:
    """The new environment's own packages only (a PYTHONPATH would bring this one's back)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env
