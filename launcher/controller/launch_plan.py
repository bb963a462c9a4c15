"""A `launch SPEC` request checked and planned, before anything is written or started.

    prepared = prepare_launch(Path("train.yaml"), LaunchFlags(clouds=("local",)))
    for line in prepared.lines(): ...          # the plan as the user reads it
    prepared.plan.budget.enforce()              # BudgetExceededError (exit 3)
    run_id = prepare_run(prepared.loaded, prepared.plan, prepared.options(), ledger, prepared.prov)

Everything that can be wrong with the input (spec, recovery settings, simulation flags, --ssh-cidr,
workdir, checkpoint folder, --cloud, data paths, mandatory tags) is refused here with its own
message, in that order; the budget refusal is the caller's to raise after showing the plan, except
where it must win over a tag or credentials problem (then it is raised here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import BadInputError, LauncherError


@dataclass(frozen=True)
class LaunchFlags:
    """What `launch` was asked besides the spec, as given on the command line."""

    clouds: tuple[str, ...] = ()  # --cloud values, each maybe a comma list
    spot: bool | None = None
    catalog_dir: Path | None = None
    dry_run: bool = False
    ssh_cidr: str | None = None
    simulate_preemptions: str | None = None
    simulate_seed: int = 0
    simulate_within_s: float | None = None
    simulate_trace: tuple[Path, ...] = ()  # one per simulated zone (one: the local machine, no zone)
    trace_speedup: float = 1.0
    trace_start_tick: int = 0
    simulate_price: str | None = None
    grace_s: float = 10.0


@dataclass(frozen=True)
class PreparedLaunch:
    loaded: Any  # launcher.spec.LoadedSpec
    plan: Any  # launcher.planning.Plan
    tags: dict[str, str]  # the cloud resources' tags
    prov: Any  # launcher.provenance.Provenance: the run id and creation time to record
    flags: LaunchFlags
    forced_clouds: tuple[str, ...] | None  # --cloud, normalized
    ssh_cidr: str | None  # normalized
    simulate_price: str | None  # --simulate-price or $LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR, when simulating
    preflight: Any = None  # launcher.planning.preflight result (a real launch only)

    def lines(self) -> list[str]:
        """The plan, the preflight notes about clouds it considered, and the local backend's
        skipped file mounts."""
        from launcher.planning import plan_lines

        plan = self.plan
        out = list(plan_lines(plan, forced_clouds=self.forced_clouds))
        considered = {c.scored.offer.cloud for c in plan.candidates} | {a.cloud for a in plan.credentials}
        for line in self.preflight.notes() if self.preflight else []:
            if line.split(":")[0] in considered:
                out.append(line)
        out.extend(local_mount_warnings(self.loaded, plan))
        return out

    def options(self):
        """The controller's launch options (kept with the run, for --resume)."""
        from launcher.controller.runner import LaunchOptions

        f = self.flags
        return LaunchOptions(
            simulate_preemptions=f.simulate_preemptions, simulate_seed=f.simulate_seed, simulate_within_s=f.simulate_within_s,
            simulate_trace=[str(p) for p in f.simulate_trace] or None, trace_speedup=f.trace_speedup,
            trace_start_tick=f.trace_start_tick, grace_s=f.grace_s, ssh_cidr=self.ssh_cidr,
            simulate_price=self.simulate_price,
        )  # fmt: skip


def prepare_launch(spec: Path, flags: LaunchFlags) -> PreparedLaunch:
    """Check the request and plan it (ranked offers, budget check, tags). Writes nothing."""
    from launcher.controller.recovery import recovery_policy
    from launcher.planning import Overrides, local_offer, make_plan
    from launcher.providers.local import PreemptionSchedule
    from launcher.spec import load_spec

    loaded = load_spec(spec)
    recovery_policy(loaded.spec.launcher.recovery, has_deadline=loaded.spec.launcher.deadline is not None)
    if flags.simulate_preemptions is not None:
        try:
            PreemptionSchedule.parse(flags.simulate_preemptions)
        except ValueError as e:
            raise BadInputError(str(e)) from None
    zones: tuple[str, ...] = ()
    if flags.simulate_trace:
        from launcher.providers.local import load_traces

        try:
            _, zone_traces = load_traces(flags.simulate_trace, speedup=flags.trace_speedup, start_tick=flags.trace_start_tick)
        except ValueError as e:
            raise BadInputError(str(e)) from None
        zones = tuple(zone_traces)
    simulated = flags.simulate_preemptions is not None or bool(flags.simulate_trace)
    from launcher.providers.local import SIMULATE_PRICE_ENV, SimulatedPrices

    if flags.simulate_price is not None:
        if not simulated:
            raise BadInputError("--simulate-price goes with --simulate-preemptions or --simulate-trace")
        SimulatedPrices.parse(flags.simulate_price)  # bad input -> exit 2 before anything is written
    # The price reaches the plan and, through the launch options, the controller.
    price_text = (flags.simulate_price if flags.simulate_price is not None else os.environ.get(SIMULATE_PRICE_ENV)) if simulated else None
    ssh_cidr = flags.ssh_cidr
    if ssh_cidr is not None:
        import ipaddress

        try:
            ssh_cidr = str(ipaddress.ip_network(ssh_cidr, strict=False))
        except ValueError:
            raise BadInputError(f"--ssh-cidr {ssh_cidr!r} is not a network like 203.0.113.7/32") from None
    from launcher import paths
    from launcher.spec.checkpoint_dir import check_checkpoint_dir
    from launcher.spec.workdir import check_workdir

    if loaded.workdir is not None:
        check_workdir(loaded.workdir, excluded=[paths.home()])
    check_checkpoint_dir(loaded, home=paths.home())
    clouds = parse_clouds(flags.clouds)
    from launcher.spec.provenance import collect_provenance

    prov = collect_provenance(loaded)  # hashes data paths: a missing one is bad input
    preflight = None
    if not flags.dry_run:  # a real launch: clouds that cannot be used leave the plan (or refuse now)
        from launcher.planning.preflight import cloud_preflight
        from launcher.providers.detect import enabled_clouds

        preflight = cloud_preflight(enabled_clouds(), ssh_cidr=ssh_cidr)

    def plan_for(*, dry_run: bool, statuses=None):
        return make_plan(
            loaded,
            overrides=Overrides(clouds=clouds, spot=flags.spot),
            catalog_dir=flags.catalog_dir,
            local_offer=local_offer(simulated=simulated, simulate_price=price_text),
            local_zones=zones,
            dry_run=dry_run,
            statuses=statuses,
        )

    try:
        plan = plan_for(dry_run=flags.dry_run, statuses=preflight.statuses if preflight else None)
    except LauncherError as e:
        if preflight is not None and preflight.problems:
            # The spec's own problems come first: the plan as if the clouds were usable must
            # pass the budget (exit 3) and carry the mandatory tags (exit 2).
            from launcher.planning.cloud_resources import require_spec_tags

            plan_for(dry_run=True).budget.enforce()
            require_spec_tags(loaded)
            raise preflight.refusal(e) from None
        raise
    from launcher.planning.cloud_resources import cloud_tags

    # Mandatory tags and their characters are checked before anything is printed (a dry run too:
    # the launch it describes would be refused); a budget refusal still takes precedence.
    try:
        tags = cloud_tags(loaded, plan, run_id=prov.run_id, created_at=prov.created_at)
    except LauncherError:
        plan.budget.enforce()
        raise
    if not flags.dry_run:
        check_local_image(loaded, plan)
    return PreparedLaunch(
        loaded=loaded, plan=plan, tags=tags, prov=prov, flags=flags, forced_clouds=clouds, ssh_cidr=ssh_cidr,
        simulate_price=price_text, preflight=preflight,
    )  # fmt: skip


def check_local_image(loaded, plan) -> None:
    """When the first attempt runs here in a container: a runtime that cannot start the image is
    one error now (launcher.executors.container), before the run is recorded or anything runs."""
    if not plan.candidates or plan.chosen.scored.offer.cloud != "local":
        return
    image = loaded.spec.resources.image_for("local")
    if image:
        from launcher.executors.container import select_runtime

        select_runtime(image)


def parse_clouds(values: list[str] | tuple[str, ...]) -> tuple[str, ...] | None:
    """--cloud values (repeatable, each maybe a comma list), normalized; None when none."""
    from launcher.spec.models import normalize_cloud

    out = []
    for v in values:
        for c in v.split(","):
            try:
                out.append(normalize_cloud(c))
            except ValueError as e:
                raise BadInputError(f"--cloud: {e}") from None
    return tuple(out) or None


def local_mount_warnings(loaded, plan) -> list[str]:
    """file_mounts the local backend will skip, said at launch rather than only in the ledger."""
    if not plan.candidates or plan.chosen.scored.offer.cloud != "local":
        return []
    from launcher.executors.local import mount_skip_reason

    out = []
    for dest, src in (loaded.spec.file_mounts or {}).items():
        if not isinstance(src, str):
            why = "only plain source paths are mounted locally"
        else:
            why = mount_skip_reason(dest, str(loaded.resolve(src)) if "://" not in src else src)
        if why:
            out.append(f"note: file_mounts {dest!r} will be skipped on the local backend: {why}")
    return out
