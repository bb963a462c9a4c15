"""Provider for clusters the user already has (`launcher clusters`): nothing to buy or release.

`provision` finds the cluster's entry (the offer's region is its name) and hands back a handle
that carries SkyPilot's infra string; the SkyPilot cluster the job runs in is the executor's
(`launcher.executors.sky_cluster`), which `sky down`s it when the attempt ends. `terminate` has
nothing of ours to remove: the machines belong to the user.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.clusters import load_clusters
from launcher.clusters.offers import reachability
from launcher.errors import CredentialsError, NotFoundError
from launcher.providers.base import ClusterHandle, ClusterRequest, CredentialStatus, InstanceInfo, Node, Provider


@dataclass
class DeclaredClusterProvider(Provider):
    name: str = "slurm"  # the infra kind: slurm | kubernetes | ssh

    def credentials(self) -> CredentialStatus:
        entries = [c for c in load_clusters().clusters if c.kind == self.name]
        reach = [(c, reachability(c)) for c in entries]
        ok = [c.name for c, r in reach if r.enabled]
        if ok:
            return CredentialStatus(self.name, True, f"declared clusters: {', '.join(ok)}")
        why = "; ".join(f"{c.name}: {r.reason}" for c, r in reach) or "no cluster of this kind declared"
        return CredentialStatus(self.name, False, why)

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        entry = load_clusters().get(request.offer.region)
        if entry is None or entry.kind != self.name:
            raise NotFoundError(f"cluster {request.offer.region!r} is no longer declared", hint="launcher clusters list")
        reach = reachability(entry)
        if not reach.enabled:
            raise CredentialsError(f"cluster {entry.name} is not reachable: {reach.reason}")
        if request.num_nodes > entry.nodes:
            from launcher.errors import BadInputError

            raise BadInputError(f"cluster {entry.name} has {entry.nodes} node(s); the task asks for {request.num_nodes}")
        nodes = tuple(Node(instance_id=f"{entry.name}/{request.cluster}/{r}", ip=None, rank=r) for r in range(request.num_nodes))
        extra = {
            "infra": entry.infra,
            "checkpoint_dir": entry.checkpoint_dir,
            "accelerator": entry.gpu or "",
            "preemptible": "true" if entry.preemptible else "false",
            "job_prefix": entry.job_prefix or "",
        }
        return ClusterHandle(cluster=request.cluster, provider=self.name, region=entry.name, zone=None, nodes=nodes, extra=extra)

    def terminate(self, handle: ClusterHandle) -> None:
        return None  # the executor's release (sky down) frees the allocation; the machines are the user's

    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        return []  # jobs, not instances: the SkyPilot cluster is torn down with its attempt


@dataclass
class SlurmClusters(DeclaredClusterProvider):
    name: str = "slurm"


@dataclass
class KubernetesClusters(DeclaredClusterProvider):
    name: str = "kubernetes"


@dataclass
class SshClusters(DeclaredClusterProvider):
    name: str = "ssh"
