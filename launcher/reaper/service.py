"""Wiring for one reaper pass from the CLI: validate the policy, check credentials of every
provider it names (before anything is touched), open the ledger, run the pass.

`stop_local_cluster(ledger, cluster)` is how a local cluster's run is ended (the CLI passes
`launcher down`; the reaper does not reach into the controller)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from launcher.errors import BadInputError
from launcher.providers import registry
from launcher.providers.local_instances import StopCluster
from launcher.reaper.policy import load_policy
from launcher.reaper.runner import ReapReport, run_pass


def reap_once(
    policy_path: Path | None,
    *,
    dry_run: bool,
    project: str | None,
    stop_local_cluster: StopCluster | None = None,
    now: datetime | None = None,
) -> ReapReport:
    policy = load_policy(policy_path)
    if policy_path is None:  # no policy file: everything the user has
        policy = policy.model_copy(update={"providers": default_providers()})
    providers = {}
    for name in policy.providers:
        prov = registry.get(name, **({"stop_cluster": stop_local_cluster} if name == "local" else {}))
        cred = prov.credentials()
        if not cred.enabled:
            raise BadInputError(f"the reaper policy names provider {name!r} but no credentials were found ({cred.source})")
        providers[name] = prov
    from launcher.ledger import Ledger

    with Ledger() as ledger:
        return run_pass(policy, providers, ledger, now=now or datetime.now(UTC), dry_run=dry_run, project=project, destroy_stack=_destroy_stack, price_lookup=_price_lookup)


def default_providers() -> list[str]:
    """Without a policy file the reaper covers every registered cloud whose credentials are
    found (files and environment only, as `launcher offers` does), the local backend, and each
    kind of cluster the user declared (`launcher clusters`)."""
    from launcher.providers.detect import enabled_clouds

    names = ["local"]
    registered = set(registry.names())
    for cloud, status in enabled_clouds().items():
        if cloud != "local" and cloud in registered and status.enabled:
            names.append(cloud)
    try:
        from launcher.clusters import load_clusters

        kinds = sorted({c.kind for c in load_clusters().clusters})
    except Exception:  # noqa: BLE001 - a broken clusters.yaml must not stop the nightly reap
        kinds = []
    return names + [k for k in kinds if k in registered and k not in names]


def _destroy_stack(project: str, cluster: str) -> None:
    """`pulumi destroy` through infra/ so the stack's state stays consistent."""
    from launcher.providers import stacks

    stacks.destroy(project, cluster)


def _price_lookup(instance) -> float | None:
    from launcher import paths
    from pricing.lookup import hourly_price

    return hourly_price(
        instance.provider, instance.region, instance.instance_type, spot=instance.spot,
        cache_dir=paths.catalog_cache_dir(), risk_file=paths.risk_file(),
    )
