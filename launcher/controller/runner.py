"""From a validated spec and plan to a controller driving a run, in this process or detached.

The run directory `$LAUNCHER_HOME/runs/<run-id>/` holds what a (resumed) controller needs:
    spec.yaml     the spec as written            plan.json   ranked offers at launch time
    launch.json   launch options                 workdir/    snapshot of the spec's workdir
    checkpoints/  default LAUNCHER_CHECKPOINT_DIR logs/       rank-N.log
    controller.log  output of a detached controller
The workdir is *copied* at launch (like SkyPilot syncing it to a cluster): later edits do not
leak into a running or resumed job, and provenance matches what ran. .git, .venv,
__pycache__ and node_modules are not copied, nor links' targets, special files or the launcher's
home (see launcher/spec/workdir.py for the limits).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from launcher import paths
from launcher.atomic import atomic_write_text
from launcher.controller.controller import Controller, ControllerDeps, RunJob, RunResult
from launcher.controller.recovery import recovery_policy
from launcher.errors import ConflictError, NotFoundError
from launcher.executors.base import DEFAULT_GRACE_SECONDS
from launcher.ledger.interfaces import LedgerReader, LedgerWriter
from launcher.planning.plan import Plan, plan_from_dict, plan_to_dict
from launcher.planning.tags import run_tags, user_name
from launcher.spec.loader import LoadedSpec, load_spec_text
from launcher.spec.provenance import collect_provenance



@dataclass(frozen=True)
class LaunchOptions:
    simulate_preemptions: str | None = None  # 'N' or '5,12,30' (seconds into each attempt)
    simulate_seed: int = 0
    simulate_within_s: float | None = None  # horizon for N random preemptions (default: simulated_preemptions.default_window_s)
    # Spot trace JSON files the local backend follows: one, or one per simulated zone (a run
    # launched before zones stored one path as a string; `trace_files` reads both).
    simulate_trace: list[str] | str | None = None
    trace_speedup: float = 1.0
    trace_start_tick: int = 0
    ssh_cidr: str | None = None  # clouds: who may SSH into the cluster (e.g. your IP/32)
    simulate_price: str | None = None  # 'SPOT[,ON_DEMAND]' USD/h of simulated capacity (kept for --resume)
    grace_s: float = DEFAULT_GRACE_SECONDS
    spec_path: str | None = None
    base_dir: str | None = None


def trace_files(opts: LaunchOptions) -> list[str]:
    t = opts.simulate_trace
    return [t] if isinstance(t, str) else list(t or [])


def run_dir(run_id: str) -> Path:
    return paths.runs_dir() / run_id


def redacted_spec_text(loaded: LoadedSpec) -> str:
    """The spec as stored in the ledger: secrets' values replaced (names kept)."""
    if not loaded.spec.secrets:
        return loaded.text
    import yaml

    data = yaml.safe_load(loaded.text)
    data["secrets"] = {k: "<redacted>" for k in data.get("secrets") or {}}
    return yaml.safe_dump(data, sort_keys=False)


def prepare_run(loaded: LoadedSpec, plan: Plan, options: LaunchOptions, ledger: LedgerWriter, prov=None) -> str:
    """Record the run (PENDING) and lay out its directory. Returns the run id."""
    from launcher.ledger.records import RunRecord

    spec, lb = loaded.spec, loaded.spec.launcher
    prov = prov or collect_provenance(loaded)
    deadline_at = prov.created_at + timedelta(hours=lb.deadline_hours) if lb.deadline_hours else None
    tags = run_tags(loaded, prov.run_id, prov.created_at)
    record = RunRecord.from_provenance(
        prov, name=spec.display_name, spec_yaml=redacted_spec_text(loaded), project=lb.project,
        experiment=lb.experiment, owner=lb.owner or user_name(), cost_center=lb.cost_center,
        budget_usd=lb.budget_usd, deadline_at=deadline_at, tags=tags,
    )  # fmt: skip
    ledger.create_run(record)
    rd = run_dir(prov.run_id)
    (rd / "logs").mkdir(parents=True, exist_ok=True)
    (rd / "checkpoints").mkdir(exist_ok=True)
    if loaded.workdir is not None:
        from launcher.spec.workdir import copy_workdir

        copy_workdir(loaded.workdir, rd / "workdir", excluded=[paths.home()])
    atomic_write_text(rd / "spec.yaml", loaded.text)
    atomic_write_text(rd / "plan.json", json.dumps(plan_to_dict(plan), indent=1))
    from dataclasses import replace

    opts = replace(
        options,
        simulate_trace=[str(Path(p).resolve()) for p in trace_files(options)] or None,
        spec_path=str(loaded.path) if loaded.path else None,
        base_dir=str(loaded.base_dir),
    )
    atomic_write_text(rd / "launch.json", json.dumps(asdict(opts), indent=1))
    from launcher.tracking.lineage import record_lineage

    record_lineage(ledger, prov.run_id, loaded, rd)  # what `launcher reproduce` rebuilds from
    return prov.run_id


def load_job(run_id: str, ledger: LedgerReader) -> tuple[RunJob, LaunchOptions, LoadedSpec]:
    rd = run_dir(run_id)
    try:
        text = (rd / "spec.yaml").read_text()
        plan = plan_from_dict(json.loads((rd / "plan.json").read_text()))
        opts = LaunchOptions(**json.loads((rd / "launch.json").read_text()))
    except FileNotFoundError as e:
        raise NotFoundError(f"run {run_id} has no usable run directory ({e.filename} is missing)", hint=f"`launcher down {run_id}` ends it") from None
    loaded = load_spec_text(text, path=Path(opts.spec_path) if opts.spec_path else None, base_dir=Path(opts.base_dir) if opts.base_dir else None)
    run = ledger.get_run(run_id)
    ckpt = loaded.spec.launcher.checkpoint
    ckpt_dir = loaded.resolve(ckpt.dir) if ckpt and ckpt.dir else rd / "checkpoints"
    job = RunJob(
        run_id=run_id, run_dir=rd, spec=loaded.spec, plan=plan,
        workdir=(rd / "workdir") if loaded.spec.workdir else None,
        checkpoint_dir=ckpt_dir, tags=dict(run.tags), grace_s=opts.grace_s, ssh_allowed_cidr=opts.ssh_cidr,
        file_mounts={
            dest: (src if "://" in src else str(loaded.resolve(src)))
            for dest, src in loaded.spec.file_mounts.items() if isinstance(src, str)
        },
    )  # fmt: skip
    return job, opts, loaded


def make_provider_for(run_id: str, opts: LaunchOptions, ledger: LedgerReader, expected_hours: float):
    """local -> one LocalProvider per controller (with the simulated preemption schedule,
    continuing after the placements already made); others from the registry."""
    from launcher.ledger.records import EndReason
    from launcher.providers import registry
    from launcher.controller.simulated_preemptions import default_window_s, requested_count
    from launcher.providers.local import LocalProvider, PreemptionSchedule, SimulatedPrices, load_traces

    schedule = None
    if opts.simulate_preemptions:
        horizon = opts.simulate_within_s or default_window_s(expected_hours, requested_count(opts.simulate_preemptions) or 0)
        schedule = PreemptionSchedule.parse(opts.simulate_preemptions, seed=opts.simulate_seed, horizon_s=horizon)
    trace, zone_traces = load_traces(trace_files(opts), speedup=opts.trace_speedup, start_tick=opts.trace_start_tick)
    # Only spot placements consume the schedule (and only those that were provisioned).
    previous_local = sum(
        1
        for a in ledger.attempts(run_id)
        if a.cloud == "local" and a.spot and a.end_reason != EndReason.PROVISION_FAILED
    )
    prices = SimulatedPrices.parse(opts.simulate_price) if opts.simulate_price else None
    local = LocalProvider(schedule, trace=trace, zone_traces=zone_traces, placements_before=previous_local, prices=prices)
    return registry.lookup({"local": local})


def preemption_shortfall(run_id: str, ledger) -> str | None:
    """After a run with `--simulate-preemptions`: a line saying how many happened and why fewer
    than asked, or None."""
    from launcher.controller.simulated_preemptions import default_window_s, requested_count, shortfall_message

    try:  # the options alone say whether preemptions were asked for: no need to re-parse the spec
        asked = json.loads((run_dir(run_id) / "launch.json").read_text()).get("simulate_preemptions")
    except FileNotFoundError:
        asked = None
    if not requested_count(asked):
        return None
    job, opts, _ = load_job(run_id, ledger)
    n = requested_count(opts.simulate_preemptions)
    window = None
    if opts.simulate_preemptions and opts.simulate_preemptions.strip().isdigit():
        window = opts.simulate_within_s or default_window_s(job.plan.work_hours, n)
    return shortfall_message(ledger, run_id, n, window)


def run_controller(
    run_id: str,
    ledger,
    *,
    mode: str,
    notify: Callable[[str], None] = lambda m: None,
    install_signals: bool = True,
    local_run_as=None,
    refuse_local: str | None = None,
) -> RunResult:
    """Drive the run to an end in this process. SIGTERM/SIGINT cancel it cleanly.

    For a server: `local_run_as` (a (JobUser, setpriv) pair, executors.job_user) runs local jobs
    as that user; `refuse_local` (a reason) refuses to run them at all."""
    from launcher.errors import RefusedError
    from launcher.executors import executor_for

    def executor_for_cloud(cloud: str):
        if cloud == "local" and refuse_local:
            raise RefusedError(refuse_local)
        if cloud == "local" and local_run_as is not None:
            return executor_for(cloud, run_as=local_run_as)
        return executor_for(cloud, provider_for=provider_for)

    job, opts, loaded = load_job(run_id, ledger)
    if refuse_local:
        job = _without_local_offers(job, ledger, refuse_local)
    from launcher.controller.placement import placement_for

    policy = recovery_policy(job.spec.launcher.recovery, has_deadline=job.spec.launcher.deadline is not None)
    provider_for = make_provider_for(run_id, opts, ledger, job.plan.work_hours)
    tick_s = provider_for("local").trace_tick_s  # the traces as the provider loaded them
    retry_s = 5.0 if tick_s is None else max(0.05, min(5.0, tick_s))  # about once per (compressed) trace tick
    deps = ControllerDeps(
        ledger=ledger,
        provider_for=provider_for,
        executor_for=executor_for_cloud,
        policy=policy,
        notify=notify,
        capacity_retry_s=retry_s,
        placement_policy=placement_for(policy, job.plan.ranked, has_deadline=job.spec.launcher.deadline is not None),
        placement_tick_s=max(retry_s, 1.0) if opts.simulate_trace else 60.0,
        observer=_tracking_session(job, ledger),
        max_wait_s=job.spec.launcher.max_wait_seconds,
    )
    controller = Controller(job, deps, mode=mode)
    previous: dict[int, object] = {}
    if install_signals:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[sig] = signal.signal(sig, lambda *_: controller.request_cancel())
    try:
        return controller.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _without_local_offers(job: RunJob, ledger, reason: str) -> RunJob:
    """The job with the plan's local offers removed; a plan of nothing else ends the run FAILED
    with the reason (RefusedError) before anything is provisioned."""
    from dataclasses import replace

    from launcher.controller.states import is_terminal
    from launcher.errors import RefusedError
    from launcher.ledger.records import EndReason, RunState

    kept = tuple(c for c in job.plan.candidates if c.scored.offer.cloud != "local")
    if len(kept) == len(job.plan.candidates):
        return job
    if kept:
        ledger.add_event(job.run_id, "local_offers_removed", {"why": reason})
        return replace(job, plan=replace(job.plan, candidates=kept))
    if not is_terminal(ledger.get_run(job.run_id).state):
        with ledger.transaction():
            ledger.add_event(job.run_id, "refused", {"why": reason})
            ledger.set_run_state(job.run_id, RunState.FAILED, reason=EndReason.PROVISION_FAILED)
    raise RefusedError(reason)


def _tracking_session(job: RunJob, ledger):
    from launcher.tracking import session_for

    return session_for(job, ledger)


def spawn_detached(run_id: str) -> int:
    """Start `python -m launcher.controller.daemon RUN` in its own session; returns its pid."""
    rd = run_dir(run_id)
    with open(rd / "controller.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher.controller.daemon", run_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ},  # the controller is the launcher (it needs LAUNCHER_DB_URL...); its jobs get job_env's allow-list
            cwd=str(rd),
        )
    from launcher.controller.liveness import record_spawn

    record_spawn(rd, proc.pid)
    return proc.pid


def check_resumable(ledger: LedgerReader, run_id: str):
    """The run, if it can be resumed: live state and no live controller."""
    from launcher.controller.liveness import controller_liveness
    from launcher.controller.states import is_terminal

    run = ledger.find_run(run_id)
    if is_terminal(run.state):
        raise ConflictError(f"run {run.run_id} already ended ({run.state}); nothing to resume")
    live = controller_liveness(ledger, run)
    if live.alive:
        raise ConflictError(f"run {run.run_id} still has a live controller ({live.why})", hint="use `launcher down` to stop it")
    return run
