"""Commands: `launcher status`, `launcher runs list|show`, `launcher logs`, `launcher down`.

Read commands take `--json`. They open the ledger only when it exists, so they never create
state on a fresh machine.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import typer

from launcher.cli.app import app
from launcher.cli.remote import remote_client, server_option
from launcher.controller.summary import run_summary  # noqa: F401  (shared with the server)


def _state_text(state: str, end_reason: str | None) -> str:
    from launcher.controller.states import state_text  # imported when used: keeps the CLI fast to start

    return state_text(state, end_reason)


runs_app = typer.Typer(help="Past and current runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


def _ledger_or_none():
    from launcher import paths

    url = paths.db_url()
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        return None
    from launcher.ledger import Ledger

    return Ledger()


def _need_ledger():
    led = _ledger_or_none()
    if led is None:
        from launcher.errors import NotFoundError

        raise NotFoundError("no runs yet (the ledger does not exist)", hint="launch task_specs/quickstart.yaml --cheapest --yes")
    return led


def _age(dt: datetime | None) -> str:
    if dt is None:
        return ""
    s = (datetime.now(UTC) - dt).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit}"
    return f"{s:.0f}s"


@app.command("status")
def status(
    json_out: bool = typer.Option(False, "--json", help="JSON output."),
    all_runs: bool = typer.Option(False, "--all", help="Also runs that ended (latest 20)."),
    server: str | None = server_option(),
) -> None:
    """Live runs, their controller (alive / orphaned) and cost so far."""
    from launcher.cli.render import info, print_json, print_table
    from launcher.controller.states import LIVE_STATES

    remote = remote_client(server)
    led = None if remote is not None else _ledger_or_none()
    if remote is not None:
        rows = remote.runs(live=not all_runs, limit=20 if all_runs else None)
    elif led is None:
        rows = []
    else:
        with led:
            runs = led.list_runs(state=None if all_runs else list(LIVE_STATES), limit=20 if all_runs else None)
            rows = [run_summary(led, r) for r in runs]
    if json_out:
        print_json({"runs": rows})
        return
    if not rows:
        info("no live runs" + ("" if all_runs else " (see `launcher status --all` or `launcher runs list`)"))
        return
    print_table(
        "runs",
        ["RUN", "NAME", "STATE", "CONTROLLER", "ATTEMPT", "WHERE", "COST $", "AGE"],
        [
            [
                r["run_id"], r["name"], _state_text(r["state"], r["end_reason"]),
                (r["controller"] or "-") + (f": {r['controller_detail']}" if r["controller"] == "orphaned" else ""),
                r["attempts"], _where(r["current"]), f"{r['cost_usd']:.4f}", _age(r["created_at"]),
            ]  # fmt: skip
            for r in rows
        ],
    )
    if any(r["controller"] == "orphaned" for r in rows):
        info("orphaned runs: `launcher down RUN` cleans up, `launch --resume RUN` continues")


def _where(cur: dict | None) -> str:
    if not cur:
        return ""
    market = "spot" if cur["spot"] else "od"
    zone = f"/{cur['zone']}" if cur.get("zone") else ""  # .get: a server of an earlier version sends none
    return f"{cur['cloud']}/{cur['region']}{zone} {cur['instance_type']} {market}"


@runs_app.command("list")
def runs_list(
    json_out: bool = typer.Option(False, "--json"),
    project: str | None = typer.Option(None, "--project"),
    state: str | None = typer.Option(None, "--state"),
    limit: int = typer.Option(50, "--limit"),
    server: str | None = server_option(),
) -> None:
    """Runs, newest first."""
    from launcher.cli.render import info, print_json, print_table

    remote = remote_client(server)
    led = None if remote is not None else _ledger_or_none()
    rows = remote.runs(project=project, state=state, limit=limit) if remote is not None else []
    if led is not None:
        with led:
            rows = [run_summary(led, r) for r in led.list_runs(project=project, state=state, limit=limit)]
    if json_out:
        print_json({"runs": rows})
        return
    if not rows:
        info("no runs")
        return
    print_table(
        None,
        ["RUN", "NAME", "PROJECT", "STATE", "ATTEMPTS", "WHERE", "COST $", "CREATED"],
        [
            [
                r["run_id"], r["name"], r["project"], _state_text(r["state"], r["end_reason"]),
                r["attempts"], _where(r["current"]), f"{r['cost_usd']:.4f}", r["created_at"].strftime("%Y-%m-%d %H:%M:%S"),
            ]  # fmt: skip
            for r in rows
        ],
    )


@runs_app.command("show")
def runs_show(run: str = typer.Argument(..., help="Run id (or unique prefix / name)."), json_out: bool = typer.Option(False, "--json")) -> None:
    """One run: provenance, tags, attempts (offer, price, start/end, reason), events."""
    from launcher.cli.render import print_json, print_table
    from launcher.controller.summary import run_detail

    with _need_ledger() as led:
        rec = led.find_run(run)
        detail = run_detail(led, rec)
        summary = detail
        attempts = led.attempts(rec.run_id)
        events = led.events(rec.run_id)
    if json_out:
        print_json(detail)
        return
    w = sys.stdout.write
    w(f"run {rec.run_id}  {rec.name}  {_state_text(summary['state'], rec.end_reason)}\n")
    for k in ("project", "experiment", "owner", "controller", "cost_usd", "spec_hash", "code_revision", "code_dirty_hash", "lockfile_hash", "environment", "image", "image_digest", "seeds", "data_hash", "host", "launcher_version", "budget_usd", "deadline_at"):
        if detail.get(k) is not None:
            w(f"  {k}: {detail[k]}\n")
    w("  tags: " + ", ".join(f"{k}={v}" for k, v in sorted(rec.tags.items())) + "\n")
    costs = {r["attempt_id"]: r["cost_usd"] for r in detail["attempt_rows"]}
    print_table(
        "attempts",
        ["#", "WHERE", "$/H", "STARTED", "ENDED", "END", "EXIT", "COST $"],
        [
            [
                a.seq, f"{a.cloud}/{a.region}{'/' + a.zone if a.zone else ''} {a.instance_type} {'spot' if a.spot else 'od'} x{a.num_nodes}",
                f"{a.price_usd_per_hour:g}", a.started_at.strftime("%H:%M:%S"),
                a.ended_at.strftime("%H:%M:%S") if a.ended_at else "", a.end_reason or a.state,
                a.exit_code if a.exit_code is not None else "", f"{costs.get(a.attempt_id, 0.0):.4f}",
            ]  # fmt: skip
            for a in attempts
        ],
    )
    print_table(
        "events",
        ["AT", "KIND", "DATA"],
        [[e.at.strftime("%H:%M:%S.%f")[:-3], e.kind, _short(e.data) if e.kind != "environment" else "(see environment above)"] for e in events],
    )


_WHERE = ("cloud", "region", "zone")


def _short(data: dict) -> str:
    """An event's data on one line; lists of places (placement scores, history) as cloud/region/zone."""
    parts = []
    for k, v in data.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            v = "; ".join(
                " ".join(["/".join(str(d[w]) for w in _WHERE if d.get(w))] + [f"{a}={b}" for a, b in d.items() if a not in _WHERE])
                for d in v
            )  # fmt: skip
        parts.append(f"{k}={v}")
    return ", ".join(parts)[:140]


@app.command("logs")
def logs(
    run: str = typer.Argument(..., help="Run id (or unique prefix / name)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
    rank: int | None = typer.Option(None, "--rank", help="Only this rank's log."),
    server: str | None = server_option(),
) -> None:
    """A run's job output (all ranks, prefixed `(rank N)` when there are several)."""
    remote = remote_client(server)
    if remote is not None:
        from launcher.cli.render import info

        def emit(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        remote.logs(run, emit, follow=follow, rank=rank, on_reconnect=lambda m: info(f"[launcher] {m}"))
        return
    from launcher.controller.logs import LogFollower, log_files, read_logs
    from launcher.controller.runner import run_dir
    from launcher.controller.states import is_terminal

    with _need_ledger() as led:
        rec = led.find_run(run)
        rd = run_dir(rec.run_id)
        ranks = set(log_files(rd))
        try:
            ranks |= set(range(int(led.attempts(rec.run_id)[-1].num_nodes)))
        except IndexError:  # no attempt yet (a run just launched): its plan says how many ranks will write
            from launcher.controller.runner import load_job
            from launcher.errors import NotFoundError

            try:
                ranks |= set(range(load_job(rec.run_id, led)[0].plan.num_nodes))
            except NotFoundError:
                pass
        multi = len(ranks) > 1
        if rank is not None and ranks and rank not in ranks:
            from launcher.errors import BadInputError

            raise BadInputError(f"run {rec.run_id} has no rank {rank}; its ranks are {', '.join(map(str, sorted(ranks)))}")
        if not follow:
            for line in read_logs(rd, rank=rank, multi=multi):
                sys.stdout.write(line + "\n")
            return

        def out(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        from launcher.controller.liveness import controller_liveness

        follower = LogFollower(rd, out, multi=multi, rank=rank)
        checks = 0
        try:
            while True:
                follower.poll_once()
                run_now = led.get_run(rec.run_id)
                if is_terminal(run_now.state):
                    break
                checks += 1
                if checks % 10 == 0:  # every ~2 s: stop following a run nobody drives
                    live = controller_liveness(led, run_now)
                    if not live.alive:
                        follower.flush()
                        from launcher.cli.render import info

                        info(f"run {rec.run_id} is orphaned ({live.why}); `launcher down` or `launch --resume` it")
                        return
                time.sleep(0.2)
        finally:
            follower.flush()


@app.command("down")
def down(
    target: str = typer.Argument(..., metavar="RUN|CLUSTER", help="Run id (or unique prefix / name) or cluster name."),
    wait_seconds: float = typer.Option(30.0, "--wait", help="How long a live controller gets to stop the job."),
    server: str | None = server_option(),
) -> None:
    """Stop a run (job stopped with SIGTERM, grace, SIGKILL; clusters torn down) or a cluster."""
    from launcher.cli.render import info

    remote = remote_client(server)
    if remote is not None:
        r = remote.down(target, wait_s=wait_seconds)
        info(f"{r['run_id']}: {r['state']} ({r['how']})")
        return
    from launcher.controller.cleanup import down_target
    from launcher.providers import registry

    with _need_ledger() as led:
        result = down_target(led, target, registry.lookup(), wait_s=wait_seconds)
    info(f"{result.run_id or target}: {result.state} ({result.how})")
