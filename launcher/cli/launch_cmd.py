"""`launch SPEC`: parse, plan, check the budget, confirm, run (or detach). `--resume RUN`
continues a run whose controller died.

Output: the plan and progress go to stderr, the job's log lines to stdout (so
`launch ... > out.txt` captures exactly the job's output); `--detach` prints the run id on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from launcher.cli.app import GLOBALS, app
from launcher.errors import BadInputError, ExitCode, JobFailedError, LauncherError, RefusedError


def _state_text(state: str, end_reason: str | None) -> str:
    from launcher.controller.states import state_text  # imported when used: keeps the CLI fast to start

    return state_text(state, end_reason)


class RunCancelledError(LauncherError):
    exit_code = ExitCode.INTERRUPTED


@app.command("launch")
def launch(
    spec: Path | None = typer.Argument(None, help="Task spec (SkyPilot task YAML + a `launcher:` block)."),
    cheapest: bool = typer.Option(False, "--cheapest", help="Take the best expected-cost offer without asking which."),
    dry_run: bool = typer.Option(
        False, "--dry-run",
        help="Print the ranked plan and, for a cloud offer, the Pulumi resource plan with tags (no credentials or Pulumi CLI needed); write and start nothing.",
    ),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: the ranked plan and the resource plan as one JSON document on stdout."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    detach: bool = typer.Option(False, "--detach", "-d", help="Run the controller in the background; print the run id."),
    submit: bool = typer.Option(False, "--submit", help="Hand the run to the team server (`server:` in the config, LAUNCHER_SERVER or --server); print its run id."),
    server: str | None = typer.Option(None, "--server", metavar="URL", help="The team server for --submit (commas: several replicas)."),
    cloud: list[str] = typer.Option([], "--cloud", metavar="CLOUD", help="Only these clouds (repeatable), e.g. --cloud local."),
    spot: bool | None = typer.Option(None, "--spot/--on-demand", help="Only spot / only on-demand offers."),
    catalog_dir: Path | None = typer.Option(None, "--catalog-dir", help="Catalogs in DIR/<cloud>/vms.csv."),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN", help="Continue a run whose controller died."),
    simulate_preemptions: str | None = typer.Option(
        None,
        "--simulate-preemptions",
        metavar="N|S1,S2,..",
        help="Local backend as spot capacity: N preemptions at seeded random times, or one per listed second count (seconds into each attempt's `run` phase).",
    ),
    simulate_seed: int = typer.Option(0, "--simulate-seed", help="Seed for --simulate-preemptions N."),
    simulate_within: float | None = typer.Option(
        None, "--simulate-within", metavar="SECONDS", help="--simulate-preemptions N: random times within this many seconds of each run start (default: half the expected run split over the N+1 attempts)."
    ),
    simulate_trace: list[Path] | None = typer.Option(
        None, "--simulate-trace", metavar="FILE", help="Local backend follows this spot trace ({metadata: {gap_seconds}, data: [0|1, ...]}, 1 = no capacity). Repeat it for several zones of simulated spot capacity, each named by its file name."
    ),
    trace_speedup: float = typer.Option(1.0, "--trace-speedup", help="Replay the trace this many times faster than real time."),
    simulate_price: str | None = typer.Option(
        None, "--simulate-price", metavar="SPOT[,ON_DEMAND]", help="Notional USD/h for simulated capacity, billed in the ledger (default: $LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR, else free)."
    ),
    trace_start_tick: int = typer.Option(0, "--trace-start-tick", help="Start the trace at this tick."),
    grace_seconds: float = typer.Option(10.0, "--grace-seconds", help="SIGTERM-to-SIGKILL grace when stopping a job."),
    ssh_cidr: str | None = typer.Option(
        None, "--ssh-cidr", metavar="CIDR", envvar="LAUNCHER_SSH_CIDR", help="Clouds: the network allowed to SSH into the cluster (e.g. your IP/32)."
    ),
) -> None:
    """Launch a task on the cheapest suitable capacity (local backend included)."""
    from launcher.cli.render import info

    if resume:
        if spec is not None:
            raise BadInputError("give either a SPEC or --resume RUN, not both")
        _resume(resume, detach=detach)
        return
    if spec is None:
        raise BadInputError("missing task spec", hint="launch task_specs/quickstart.yaml --cheapest --yes")
    if as_json and not dry_run:
        raise BadInputError("--json goes with --dry-run (a launch streams the job's output)")
    from launcher.controller.launch_plan import LaunchFlags, prepare_launch

    flags = LaunchFlags(
        clouds=tuple(cloud), spot=spot, catalog_dir=catalog_dir or GLOBALS.catalog_dir, dry_run=dry_run,
        ssh_cidr=ssh_cidr, simulate_preemptions=simulate_preemptions, simulate_seed=simulate_seed,
        simulate_within_s=simulate_within, simulate_trace=tuple(simulate_trace or ()), trace_speedup=trace_speedup,
        trace_start_tick=trace_start_tick, simulate_price=simulate_price, grace_s=grace_seconds,
    )  # fmt: skip
    prepared = prepare_launch(spec, flags)  # everything wrong with the input is refused here
    plan = prepared.plan
    if not as_json:
        for line in prepared.lines():
            info(line)
    plan.budget.enforce()
    if dry_run:
        _dry_run_resources(prepared.loaded, plan, prepared.tags, ssh_cidr=prepared.ssh_cidr, as_json=as_json)
        return
    if not yes:
        plan = _confirm(plan, ask_which=not cheapest)

    from launcher.server.settings import server_settings

    options = prepared.options()
    remote = server_settings(server)
    if submit or remote is not None:
        from launcher.server.submission import submit_to_server

        run_id = submit_to_server(remote, prepared.loaded, plan, options, prepared.prov)
        info(f"run {run_id} submitted to {remote.urls[0]}; follow it with: launcher logs {run_id} --follow")
        sys.stdout.write(run_id + "\n")
        return
    from launcher.controller.runner import prepare_run, spawn_detached
    from launcher.ledger import Ledger

    with Ledger() as ledger:
        run_id = prepare_run(prepared.loaded, plan, options, ledger, prepared.prov)
        if detach:
            pid = spawn_detached(run_id)
            info(f"run {run_id} started in the background (controller pid {pid}); follow it with: launcher logs {run_id} --follow")
            sys.stdout.write(run_id + "\n")
            return
        info(f"run {run_id}")
        _run_foreground(run_id, ledger, num_nodes=plan.num_nodes, mode="foreground")


def _dry_run_resources(loaded, plan, tags, *, ssh_cidr: str | None, as_json: bool) -> None:
    """The chosen offer's Pulumi resource plan (computed under mocks), as text on stderr or as
    the JSON dry-run document on stdout."""
    import contextlib

    from launcher.cli.render import info, print_json
    from launcher.planning.cloud_resources import chosen_resource_plan, dry_run_document

    resources = chosen_resource_plan(loaded, plan, tags, ssh_cidr=ssh_cidr)
    if as_json:
        print_json(dry_run_document(plan, resources))
        return
    if resources.spec is None:
        info(f"resources: {resources.note}")
    else:
        from launcher.cli.infra_cmd import print_resource_plan

        # launch keeps stdout for the job's output; the plan tables go with the rest of the plan.
        with contextlib.redirect_stdout(sys.stderr):
            print_resource_plan(resources.spec, list(resources.resources))
        for need in resources.deploy_needs:
            info(f"  a real launch also needs {need}")
    info("dry run: nothing was launched or recorded")


def _confirm(plan, *, ask_which: bool):
    """Ask on the terminal (or read one line from piped stdin). No answer -> refuse."""
    from dataclasses import replace

    from launcher.cli.render import info
    from launcher.planning import offer_label

    top = plan.candidates[:9] if ask_which else plan.candidates[:1]
    if ask_which and len(top) > 1:
        for i, c in enumerate(top, 1):
            info(f"  [{i}] {offer_label(c.scored.offer)}  ~${c.scored.expected_cost_usd * plan.num_nodes:,.2f}")
        prompt = f"Launch which? [1-{len(top)}, Enter = 1, n = cancel] "
    else:
        prompt = "Launch? [Y/n] "
    sys.stderr.write(prompt)
    sys.stderr.flush()
    answer = sys.stdin.readline() if sys.stdin is not None else ""
    if answer == "":
        raise RefusedError("no answer to the confirmation prompt (stdin is closed)", hint="pass --yes to launch without asking")
    answer = answer.strip().lower()
    if answer in ("n", "no", "q"):
        raise RefusedError("launch cancelled at the prompt")
    if answer in ("", "y", "yes"):
        return plan
    if ask_which and answer.isdigit() and 1 <= int(answer) <= len(top):
        k = int(answer) - 1
        cands = (plan.candidates[k], *plan.candidates[:k], *plan.candidates[k + 1 :])
        return replace(plan, candidates=cands)
    raise RefusedError(f"unrecognized answer {answer!r}; nothing launched")


def _resume(target: str, *, detach: bool) -> None:
    from launcher.cli.render import info
    from launcher.controller.runner import check_resumable, load_job, spawn_detached
    from launcher.cli.runs_cmd import _need_ledger

    with _need_ledger() as ledger:  # resuming never creates a ledger
        run = check_resumable(ledger, target)
        job, _, _ = load_job(run.run_id, ledger)  # fails early when the run dir is unusable
        info(f"resuming run {run.run_id} (was {run.state})")
        if detach:
            pid = spawn_detached(run.run_id)
            info(f"controller pid {pid}")
            sys.stdout.write(run.run_id + "\n")
            return
        _run_foreground(run.run_id, ledger, num_nodes=job.spec.num_nodes, mode="resume", from_start=False)


def _run_foreground(run_id: str, ledger, *, num_nodes: int, mode: str, from_start: bool = True) -> None:
    from launcher.cli import startup_gc
    from launcher.cli.render import info
    from launcher.controller.logs import LogFollower
    from launcher.controller.runner import run_controller, run_dir

    startup_gc.release()  # the controller may run for days
    closed = []

    def out(line: str) -> None:
        if closed:
            return
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError):  # e.g. `launch ... | head`: the job goes on, logs stay in the file
            closed.append(True)

    follower = LogFollower(run_dir(run_id), out, multi=num_nodes > 1, from_start=from_start).start()
    try:
        result = run_controller(run_id, ledger, mode=mode, notify=lambda m: info(f"[launcher] {m}"))
    finally:
        follower.stop()
    cost = ledger.run_spend_usd(run_id)
    info(f"[launcher] run {run_id}: {_state_text(result.state, result.end_reason)}, {result.attempts} attempt(s), cost ${cost:,.4f}")
    from launcher.controller.runner import preemption_shortfall

    shortfall = preemption_shortfall(run_id, ledger)
    if shortfall:
        info(f"[launcher] {shortfall}")
    if result.state == "succeeded":
        return
    if result.state == "failed":
        why = "setup failed" if result.end_reason == "setup_failed" else "job failed"
        code = f" with exit code {result.exit_code}" if result.exit_code is not None else ""
        raise JobFailedError(f"run {run_id}: {why}{code}", hint=f"see `launcher logs {run_id}`")
    if result.state == "budget_stopped":
        raise RefusedError(f"run {run_id} was stopped: its budget was spent")
    raise RunCancelledError(f"run {run_id} was cancelled")
