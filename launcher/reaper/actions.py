"""Reaper actions, registered by name. Each acts through the owner of the resource:
`pulumi destroy` for a stack (state stays consistent), the provider API for an orphan, the local
executor (via the local provider) for local clusters. Actions never check dry-run: the runner
enforces it once.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

from launcher.errors import ProviderError
from launcher.providers.base import InstanceInfo, InstanceStop, InstanceTermination, Provider

StackDestroyer = Callable[[str, str], None]  # (project, cluster) -> destroy its stack (idempotent)


@dataclass(frozen=True)
class ActionTarget:
    provider: Provider
    instance: InstanceInfo
    stack: str | None  # stack name, when the ledger knows the cluster was made by infra/
    project: str | None = None
    cluster: str | None = None


class Action(abc.ABC):
    name: str = "base"

    @abc.abstractmethod
    def execute(self, target: ActionTarget, destroy_stack: StackDestroyer | None) -> str:
        """Do it; return what was done (for the audit log). Idempotent."""


ACTIONS: dict[str, type[Action]] = {}


def register(cls: type[Action]) -> type[Action]:
    ACTIONS[cls.name] = cls
    return cls


@register
class Destroy(Action):
    name = "destroy"

    def execute(self, target, destroy_stack):
        if target.stack and target.project and target.cluster and destroy_stack is not None:
            destroy_stack(target.project, target.cluster)
            return f"destroyed stack {target.stack}"
        if not isinstance(target.provider, InstanceTermination):
            raise ProviderError(f"{target.provider.name} cannot terminate single instances (no InstanceTermination capability)")
        target.provider.terminate_instance(target.instance.region, target.instance.instance_id)
        return f"terminated {target.instance.instance_id}"


@register
class Stop(Action):
    name = "stop"

    def execute(self, target, destroy_stack):
        if not isinstance(target.provider, InstanceStop):
            raise ProviderError(f"{target.provider.name} cannot stop instances (no InstanceStop capability)")
        target.provider.stop_instance(target.instance.region, target.instance.instance_id)
        return f"stopped {target.instance.instance_id}"


def get_action(name: str) -> Action:
    return ACTIONS[name]()
