"""The cloud names, one vocabulary for the whole project (`launcher` imports it; so may `infra`).

- CATALOG_CLOUDS: clouds with a SkyPilot-format price catalog (snapshot, cache, refresh).
- LOCAL: this machine (the embedded backend); it has no catalog, its offer is built in.
- KUBERNETES: a cluster the user already has, named in a spec's `infra:`.
- DECLARED_CLUSTER_KINDS: SkyPilot infra kinds of clusters the user declared (`launcher clusters`),
  named in a spec as `infra: slurm/<cluster>`; each kind is a provider.
- PROVIDER_CLOUDS: clouds a launch can run on, each with a provider (launcher.providers.registry,
  which adds one provider per DECLARED_CLUSTER_KIND). Catalog clouds without one (azure, lambda,
  runpod) are priced and listed by `launcher offers`, never launched on.
- PRICED_ONLY_CLOUDS: those catalog clouds without a provider (a plan skips them, saying why).
- DETECTABLE_CLOUDS: clouds the launcher looks for credentials of (catalog clouds and local).
- CLOUD_ALIASES / canonical_cloud: other names users write for a cloud.
- SPEC_CLOUDS: what a task spec's `infra:` / `--cloud` may name.
- STACK_CLOUDS: clouds whose clusters are Pulumi stacks (programs in infra/) and whose
  instances the reaper lists, with LOCAL.
"""

from __future__ import annotations

CATALOG_CLOUDS = ("aws", "gcp", "azure", "lambda", "runpod")
LOCAL = "local"
KUBERNETES = "kubernetes"
DECLARED_CLUSTER_KINDS = ("slurm", KUBERNETES, "ssh")
SPEC_CLOUDS = (*CATALOG_CLOUDS, *DECLARED_CLUSTER_KINDS, LOCAL)
STACK_CLOUDS = ("aws", "gcp")
PROVIDER_CLOUDS = (*STACK_CLOUDS, LOCAL)
# Catalog clouds with prices but no provider: offers lists them, a launch never plans on them.
PRICED_ONLY_CLOUDS = tuple(c for c in CATALOG_CLOUDS if c not in PROVIDER_CLOUDS)
DETECTABLE_CLOUDS = (*CATALOG_CLOUDS, LOCAL)
REAPABLE_CLOUDS = (*STACK_CLOUDS, LOCAL)

# Other names users write for a cloud (SkyPilot's `k8s`, older or vendor names).
CLOUD_ALIASES = {"k8s": KUBERNETES, "lambdalabs": "lambda", "google": "gcp", "amazon": "aws"}


def canonical_cloud(name: str) -> str:
    """A cloud name as the project spells it: lowercase, aliases resolved (unknown names are
    returned lowercased, for the caller's own "did you mean")."""
    key = name.strip().lower()
    return CLOUD_ALIASES.get(key, key)
