"""One reaper pass across providers: gather observations, decide, then (unless dry run) act.

Dry run is enforced here, once. A file lock keeps two reapers from acting at once. Provider
calls are retried by their SDKs (botocore, google-api-core); errors a provider marks transient are
retried here with backoff (retry.py); a failure on one instance is recorded and the pass goes on.
Every instance considered is written to the ledger's reap audit (not in a dry run, which
changes nothing anywhere).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from filelock import FileLock, Timeout

from launcher import paths
from launcher.errors import ConflictError, ProviderError
from launcher.ledger import ClusterState, Ledger, ReapAuditRecord
from launcher.providers.base import (
    BatchIdleSignals,
    IdleSignals,
    IdleSignalSource,
    InstanceInfo,
    InstanceMarks,
    PartialListing,
    Provider,
)
from launcher.reaper.actions import ActionTarget, StackDestroyer, get_action
from launcher.reaper.decide import MARK_TAG, DecisionKind, decide, format_mark, parse_expiry
from launcher.reaper.filters import Observation
from launcher.reaper.policy import ReapPolicy
from launcher.reaper.retry import with_retries

PriceLookup = Callable[[InstanceInfo], float | None]
SAVING_HORIZON_HOURS = 24.0  # the reaper runs nightly: a teardown saves at most a day per pass


@dataclass(frozen=True)
class ReapOutcome:
    provider: str
    region: str
    instance_id: str
    instance_type: str
    project: str | None
    cluster: str | None
    decision: str
    action: str | None
    reasons: list[str]
    hourly_price_usd: float | None
    estimated_saving_usd: float | None
    ok: bool = True
    error: str | None = None

    def to_json(self) -> dict:
        return {
            "provider": self.provider,
            "region": self.region,
            "instance_id": self.instance_id,
            "instance_type": self.instance_type,
            "project": self.project,
            "cluster": self.cluster,
            "decision": self.decision,
            "action": self.action,
            "reasons": self.reasons,
            "hourly_price_usd": self.hourly_price_usd,
            "estimated_saving_usd": self.estimated_saving_usd,
            "ok": self.ok,
            "error": self.error,
        }


@dataclass
class ReapReport:
    pass_id: str
    dry_run: bool
    outcomes: list[ReapOutcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # provider-level failures (listing)


def estimated_saving(price: float | None, instance: InstanceInfo, now: datetime) -> float | None:
    if price is None:
        return None
    hours = SAVING_HORIZON_HOURS
    exp = parse_expiry(instance.tags.get("expires-at"))
    if exp is not None and exp > now:
        hours = min(hours, (exp - now).total_seconds() / 3600)
    return round(price * hours, 4)


def run_pass(
    policy: ReapPolicy,
    providers: Mapping[str, Provider],
    ledger: Ledger,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    project: str | None = None,
    destroy_stack: StackDestroyer | None = None,
    price_lookup: PriceLookup | None = None,
    sleep: Callable[[float], None] | None = None,
    lock_timeout_s: float = 0.0,
) -> ReapReport:
    now = now or datetime.now(UTC)
    lock = FileLock(str(paths.ensure_home() / "reaper.lock"))
    try:
        lock.acquire(timeout=lock_timeout_s)
    except Timeout:
        raise ConflictError("another reaper pass is running (lock held)", hint=f"lock file: {lock.lock_file}") from None
    try:
        report = ReapReport(pass_id=f"reap-{now.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}", dry_run=dry_run)
        retry_kwargs = {"sleep": sleep} if sleep else {}
        for name, provider in providers.items():
            failed_regions: set[str] = set()
            try:
                if isinstance(provider, PartialListing):  # one failing region must not hide the others
                    instances, region_errors = with_retries(provider.list_instances_partial, **retry_kwargs)
                    failed_regions = set(region_errors)
                    report.errors += [f"{name}/{r}: listing failed: {err}" for r, err in sorted(region_errors.items())]
                else:
                    instances = with_retries(provider.list_instances, **retry_kwargs)
            except Exception as e:  # noqa: BLE001 - reported, the pass goes on
                report.errors.append(f"{name}: listing failed: {e}")
                continue
            if project:
                instances = [i for i in instances if i.tags.get("project") == project]
            batch = _batch_signals(provider, instances, policy, retry_kwargs)
            clusters = {c.name: c for c in ledger.clusters(provider=name)}
            by_instance = {n.get("instance_id"): c for c in clusters.values() for n in c.nodes if n.get("instance_id")}
            quiet: list[ReapAuditRecord] = []  # rows that record no action: one transaction
            try:
                for inst in sorted(instances, key=lambda i: (i.region, i.instance_id)):
                    outcome = _consider(inst, provider, policy, ledger, clusters, by_instance, now, dry_run, destroy_stack, price_lookup, report.pass_id, retry_kwargs, batch, quiet)
                    report.outcomes.append(outcome)
            finally:
                if not dry_run:
                    ledger.record_reap_many(quiet)
            listed = {i.instance_id for i in instances}
            for c in clusters.values():
                if project and c.project != project:
                    continue
                if c.region in failed_regions or (c.zone and c.zone in failed_regions):
                    continue  # not listed is not gone: never destroy on a failed listing
                gone = _orphan_stack_outcome(c, listed, provider, ledger, now, dry_run, destroy_stack, report.pass_id)
                if gone is not None:
                    report.outcomes.append(gone)
        if not dry_run and policy.notify is not None:
            from launcher.reaper import notify

            msg = notify.message(report.pass_id, report.outcomes)
            if msg is not None:
                report.errors += notify.send(policy.notify, msg)
        return report
    finally:
        lock.release()


def _batch_signals(provider, instances, policy, retry_kwargs) -> dict[str, object]:
    """Providers that can read many instances' metrics in one call (CloudWatch get_metric_data
    takes 500 queries) expose `idle_signals_many`; one call per distinct window. A failure
    here falls back to per-instance reads."""
    if not isinstance(provider, BatchIdleSignals) or not instances:
        return {}
    many = provider.idle_signals_many
    by_window: dict[int, list[InstanceInfo]] = {}
    for i in instances:
        by_window.setdefault(policy.for_project(i.tags.get("project")).idle.window_minutes, []).append(i)
    out: dict[str, object] = {}
    for window, group in by_window.items():
        try:
            out.update(with_retries(lambda g=group, w=window: many(g, w), **retry_kwargs))
        except Exception:  # noqa: BLE001 - per-instance reads below report the error
            pass
    return out


def _consider(inst, provider, policy, ledger, clusters, by_instance, now, dry_run, destroy_stack, price_lookup, pass_id, retry_kwargs, batch, quiet) -> ReapOutcome:
    proj_policy = policy.for_project(inst.tags.get("project"))
    cluster = by_instance.get(inst.instance_id) or clusters.get(inst.tags.get("cluster", ""))
    run_id = (cluster.run_id if cluster else None) or inst.tags.get("run-id")
    ledger_known = cluster is not None or (run_id is not None and _run_exists(ledger, run_id))
    running = bool(ledger.open_attempts(cluster=cluster.name)) if cluster else False
    if not running and run_id and ledger_known:
        running = bool(ledger.open_attempts(run_id=run_id))
    # The cluster heartbeat is the executor's sign of job progress; the run heartbeat only says
    # the controller is alive, which a stalled job's controller still is.
    beat = ledger.last_heartbeat(cluster=cluster.name) if cluster else None
    signals, sig_err = batch.get(inst.instance_id), None
    if signals is None and not isinstance(provider, IdleSignalSource):
        signals = IdleSignals(None, None)  # publishes no metrics: unknown, never idle
    elif signals is None:
        try:
            signals = with_retries(lambda: provider.idle_signals(inst, proj_policy.idle.window_minutes), **retry_kwargs)
        except Exception as e:  # noqa: BLE001
            sig_err = f"{type(e).__name__}: {e}"
    if signals is not None and signals.error:  # read failed after bounded retries: unknown
        signals, sig_err = None, signals.error
    obs = Observation(
        instance=inst,
        signals=signals,
        ledger_known=ledger_known,
        ledger_running=running,
        last_heartbeat=beat,
        stack=cluster.stack if cluster else None,
        signals_error=sig_err,
    )
    d = decide(obs, proj_policy, now)
    price = inst.hourly_price_usd if inst.hourly_price_usd is not None else (price_lookup(inst) if price_lookup else None)
    saving = estimated_saving(price, inst, now) if d.decision is DecisionKind.ACT else None
    action: str | None = None
    ok, error = True, None
    if d.decision is DecisionKind.MARK:
        action = "tag-mark"
    elif d.decision is DecisionKind.ACT:
        action = proj_policy.action
    elif d.clear_mark:
        action = "clear-mark"
    reasons = list(d.reasons)
    if not dry_run and action is not None:
        try:
            if action == "tag-mark":
                marks = _marks(provider)
                with_retries(lambda: marks.tag_instance(inst.region, inst.instance_id, {MARK_TAG: format_mark(now)}), **retry_kwargs)
            elif action == "clear-mark":
                marks = _marks(provider)
                with_retries(lambda: marks.untag_instance(inst.region, inst.instance_id, [MARK_TAG]), **retry_kwargs)
            else:
                target = ActionTarget(provider=provider, instance=inst, stack=obs.stack, project=cluster.project if cluster else None, cluster=cluster.name if cluster else None)
                done = with_retries(lambda: get_action(action).execute(target, destroy_stack), **retry_kwargs)
                reasons.append(done)
                if cluster is not None and action == "destroy":
                    ledger.set_cluster_state(cluster.name, ClusterState.TERMINATED)
        except Exception as e:  # noqa: BLE001 - recorded; the pass goes on
            ok, error = False, f"{type(e).__name__}: {e}"
    outcome = ReapOutcome(
        provider=provider.name,
        region=inst.region,
        instance_id=inst.instance_id,
        instance_type=inst.instance_type,
        project=inst.tags.get("project"),
        cluster=cluster.name if cluster else inst.tags.get("cluster"),
        decision=d.decision.value,
        action=action,
        reasons=reasons,
        hourly_price_usd=price,
        estimated_saving_usd=saving,
        ok=ok,
        error=error,
    )
    if not dry_run:
        # Actions are audited before the next instance is touched; the rest in one batch.
        (ledger.record_reap if action is not None else quiet.append)(
            ReapAuditRecord(
                provider=outcome.provider,
                region=outcome.region,
                instance_id=outcome.instance_id,
                decision=outcome.decision,
                action=outcome.action,
                reasons=outcome.reasons,
                hourly_price_usd=outcome.hourly_price_usd,
                estimated_saving_usd=outcome.estimated_saving_usd,
                ok=ok,
                error=error,
                dry_run=False,
                pass_id=pass_id,
                cluster=outcome.cluster,
                project=outcome.project,
                at=now,
            )
        )
    return outcome


def _marks(provider: Provider) -> InstanceMarks:
    if not isinstance(provider, InstanceMarks):
        raise ProviderError(f"{provider.name} cannot tag instances (no InstanceMarks capability)")
    return provider


def _run_exists(ledger: Ledger, run_id: str) -> bool:
    try:
        ledger.get_run(run_id)
        return True
    except Exception:  # noqa: BLE001 - NotFoundError
        return False



def _orphan_stack_outcome(cluster, listed, provider, ledger, now, dry_run, destroy_stack, pass_id) -> ReapOutcome | None:
    """A cluster the ledger thinks is up whose instances are all gone: destroy its stack so
    Pulumi state matches reality, and mark it terminated in the ledger."""
    if cluster.state not in (ClusterState.UP, ClusterState.STOPPED) or not cluster.nodes:
        return None
    ids = [n.get("instance_id") for n in cluster.nodes if n.get("instance_id")]
    if not ids or any(i in listed for i in ids):
        return None
    if ledger.open_attempts(cluster=cluster.name):
        return None  # the controller still owns it; it will notice the node loss itself
    reasons = [f"instances {', '.join(ids)} are gone; cluster {cluster.name} still recorded as {cluster.state}"]
    ok, error = True, None
    if not dry_run:
        try:
            if cluster.stack and cluster.project and destroy_stack is not None:
                destroy_stack(cluster.project, cluster.name)
                reasons.append(f"destroyed stack {cluster.stack}")
            ledger.set_cluster_state(cluster.name, ClusterState.TERMINATED)
        except Exception as e:  # noqa: BLE001
            ok, error = False, f"{type(e).__name__}: {e}"
    out = ReapOutcome(
        provider=provider.name, region=cluster.region or "", instance_id=ids[0], instance_type="",
        project=cluster.project, cluster=cluster.name, decision=DecisionKind.ACT.value,
        action="destroy-stack" if cluster.stack else "forget-cluster", reasons=reasons,
        hourly_price_usd=None, estimated_saving_usd=0.0, ok=ok, error=error,
    )
    if not dry_run:
        ledger.record_reap(ReapAuditRecord(
            provider=out.provider, region=out.region, instance_id=out.instance_id, decision=out.decision,
            action=out.action, reasons=out.reasons, ok=ok, error=error, pass_id=pass_id,
            cluster=out.cluster, project=out.project, at=now,
        ))
    return out
