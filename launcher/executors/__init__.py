"""Executors run a task on a provisioned cluster: `local` (process groups here), later `sky`.

`PREEMPTED_EXIT_CODE` is the exit code a job uses after it saved a checkpoint on a preemption
notice (see base.py).
"""

from __future__ import annotations

import importlib

from launcher.errors import ProviderError
from launcher.executors.base import (
    DEFAULT_GRACE_SECONDS,
    PREEMPTED_EXIT_CODE,
    ExecRequest,
    ExecResult,
    Execution,
    Executor,
    Outcome,
    RankExit,
)

# provider name -> "module:Class" of the executor that runs jobs on its clusters.
_EXECUTORS: dict[str, str] = {
    "local": "launcher.executors.local:LocalExecutor",
    "sky": "launcher.executors.sky:SkyExecutor",  # every other cloud: SkyPilot on our cluster
    # clusters the user already has: SkyPilot launches straight onto them
    "slurm": "launcher.executors.sky_cluster:SkyClusterExecutor",
    "kubernetes": "launcher.executors.sky_cluster:SkyClusterExecutor",
    "ssh": "launcher.executors.sky_cluster:SkyClusterExecutor",
}
_DEFAULT_REMOTE = "sky"


def register(provider: str, target: str) -> None:
    _EXECUTORS[provider] = target


def executor_for(provider: str, *, provider_for=None, **kwargs) -> Executor:
    """The executor for clusters of `provider` (local -> LocalExecutor, clouds -> sky).

    `provider_for(cloud)`: the providers the SkyPilot executor on our clusters asks whether a
    lost node was reclaimed by the cloud (local and declared-cluster executors need none)."""
    target = _EXECUTORS.get(provider) or _EXECUTORS.get(_DEFAULT_REMOTE)
    if provider_for is not None and target == _EXECUTORS.get(_DEFAULT_REMOTE):
        kwargs["provider_for"] = provider_for  # only SkyPilot on our own clusters asks the cloud
    if target is None:
        raise ProviderError(
            f"no executor can run jobs on {provider!r} clusters yet",
            hint="use an 'infra: local' alternative or pass --cloud local",
        )
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


_SKY_CLUSTER = "launcher.executors.sky_cluster:SkyClusterExecutor"


def keeps_sky_cluster(provider: str) -> bool:
    """Whether jobs on `provider`'s clusters run in a SkyPilot cluster of their own (one per
    attempt) that holds the allocation: declared Slurm, Kubernetes, SSH pools. Such a cluster
    outlives a dead controller until it is `sky down`ed (the provider has nothing to terminate)."""
    return _EXECUTORS.get(provider) == _SKY_CLUSTER


def declared_cluster_executor(provider: str):
    """The executor that releases such clusters (see keeps_sky_cluster), or None."""
    return executor_for(provider) if keeps_sky_cluster(provider) else None


__all__ = [
    "declared_cluster_executor",
    "keeps_sky_cluster",
    "DEFAULT_GRACE_SECONDS",
    "PREEMPTED_EXIT_CODE",
    "ExecRequest",
    "ExecResult",
    "Execution",
    "Executor",
    "Outcome",
    "RankExit",
    "executor_for",
    "register",
]
