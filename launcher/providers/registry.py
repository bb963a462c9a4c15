"""Provider registry keyed by name. Modules are imported lazily (cloud SDKs are heavy)."""

from __future__ import annotations

import importlib

from launcher.errors import UnknownNameError
from launcher.providers.base import Provider
from pricing.clouds import DECLARED_CLUSTER_KINDS, PROVIDER_CLOUDS

# name -> "module:Class"
_PROVIDERS: dict[str, str] = {
    "local": "launcher.providers.local:LocalProvider",
    "aws": "launcher.providers.aws:AwsProvider",
    "gcp": "launcher.providers.gcp:GcpProvider",
    # clusters the user declared (`launcher clusters`), one provider per SkyPilot infra kind
    "slurm": "launcher.providers.declared:SlurmClusters",
    "kubernetes": "launcher.providers.declared:KubernetesClusters",
    "ssh": "launcher.providers.declared:SshClusters",
}

# Clouds and cluster kinds that have a provider (the names above); tests/providers check they agree.
KNOWN_CLOUDS = (*PROVIDER_CLOUDS, *DECLARED_CLUSTER_KINDS)


def register(name: str, target: str) -> None:
    _PROVIDERS[name] = target


def names() -> list[str]:
    return sorted(_PROVIDERS)


def get(name: str, **kwargs) -> Provider:
    if name not in _PROVIDERS:
        raise UnknownNameError("provider", name, _PROVIDERS)
    module, cls = _PROVIDERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


def lookup(known: dict[str, Provider] | None = None):
    """`cloud -> Provider`, each made once on first use (`known` seeds it, e.g. a configured local)."""
    cache: dict[str, Provider] = dict(known or {})

    def provider_for(cloud: str) -> Provider:
        if cloud not in cache:
            cache[cloud] = get(cloud)
        return cache[cloud]

    return provider_for
