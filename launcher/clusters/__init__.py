"""Clusters the user already has (Slurm, Kubernetes, SSH node pools), declared in
`$LAUNCHER_HOME/clusters.yaml` and offered beside cloud capacity at their internal price.

SkyPilot runs jobs there (launcher.executors.sky_cluster); nothing here imports SkyPilot.
"""

from launcher.clusters.models import CLUSTER_KINDS, ClusterEntry, ClustersFile
from launcher.clusters.store import clusters_path, load_clusters, remove_cluster, save_cluster

__all__ = [
    "CLUSTER_KINDS",
    "ClusterEntry",
    "ClustersFile",
    "clusters_path",
    "load_clusters",
    "remove_cluster",
    "save_cluster",
]
