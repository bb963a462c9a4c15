"""The `[sky]` extra installs what SkyPilot's Slurm and Kubernetes (and SSH node pool) infras
import: without it SkyPilot says "Failed to import dependencies for Kubernetes"."""

from __future__ import annotations


def test_slurm_adaptor_dependencies_import() -> None:
    from sky.adaptors import slurm

    # the lazy import resolves to the real module (python-hostlist)
    assert slurm.hostlist.expand_hostlist("n[1-3]") == ["n1", "n2", "n3"]


def test_kubernetes_adaptor_dependencies_import() -> None:
    from sky.adaptors import kubernetes

    assert kubernetes.kubernetes.client.V1Pod.__name__ == "V1Pod"
    import websockets  # the SSH node pool / k8s exec path

    assert websockets.__version__
