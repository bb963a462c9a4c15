"""Commands: `launcher clusters add|list|remove|check` (clusters the user already has)."""

from __future__ import annotations

import typer

from launcher.cli.app import app

clusters_app = typer.Typer(help="Clusters you already have (Slurm, Kubernetes, SSH pools), offered beside cloud capacity.", no_args_is_help=True)
app.add_typer(clusters_app, name="clusters")


@clusters_app.command("add")
def add(
    name: str = typer.Argument(..., help="Name for the cluster (lowercase, digits, '-')."),
    infra: str = typer.Option(..., "--infra", help="How SkyPilot reaches it: slurm/<cluster>, k8s/<context> or ssh/<pool>."),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU model on each node, e.g. A100-80GB."),
    gpus_per_node: int = typer.Option(0, "--gpus-per-node"),
    nodes: int = typer.Option(1, "--nodes", help="Nodes a job may use."),
    cpus: float | None = typer.Option(None, "--cpus", help="CPUs per node."),
    memory_gib: float | None = typer.Option(None, "--memory-gib", help="Memory per node."),
    price_gpu: float = typer.Option(0.0, "--price-usd-per-gpu-hour", help="Internal price of one GPU-hour (default 0)."),
    price_node: float = typer.Option(0.0, "--price-usd-per-node-hour", help="Internal price of one node-hour besides GPUs."),
    preemptible: bool = typer.Option(False, "--preemptible", help="Jobs there can be preempted."),
    checkpoint_dir: str | None = typer.Option(None, "--checkpoint-dir", help="Checkpoints on the cluster's shared filesystem."),
    job_prefix: str | None = typer.Option(None, "--job-prefix", help="Shell lines run before setup and run there (module load, PATH)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an entry of that name."),
) -> None:
    """Declare a cluster in $LAUNCHER_HOME/clusters.yaml."""
    from pydantic import ValidationError

    from launcher.clusters import ClusterEntry, clusters_path, save_cluster
    from launcher.cli.render import info
    from launcher.config_file import validation_error

    raw = {
        "name": name, "infra": infra, "gpu": gpu, "gpus_per_node": gpus_per_node, "nodes": nodes,
        "cpus_per_node": cpus, "memory_gib_per_node": memory_gib, "price_usd_per_gpu_hour": price_gpu,
        "price_usd_per_node_hour": price_node, "preemptible": preemptible,
    }  # fmt: skip
    if job_prefix is not None:
        raw["job_prefix"] = job_prefix
    if checkpoint_dir is not None:
        raw["checkpoint_dir"] = checkpoint_dir
    try:
        entry = ClusterEntry.model_validate(raw)
    except ValidationError as e:
        from launcher.errors import SpecError

        err = e.errors()[0]
        field = err["loc"][0] if err["loc"] else None
        if field in _FLAGS:  # a flag's value: name the flag as typed, in words, not pydantic's
            raise SpecError(f"{_FLAGS[field]} {raw[field]!r}: {_in_words(err)}") from None
        if err["loc"]:
            raise validation_error(clusters_path(), ClusterEntry, e) from None
        raise SpecError(f"cluster {name!r}: {err['msg'].removeprefix('Value error, ')}") from None
    save_cluster(entry, replace=replace)
    info(f"declared {entry.name}: {entry.infra} ({clusters_path()})")


# ClusterEntry field -> the `clusters add` argument that sets it.
_FLAGS = {
    "name": "NAME", "infra": "--infra", "gpu": "--gpu", "gpus_per_node": "--gpus-per-node", "nodes": "--nodes",
    "cpus_per_node": "--cpus", "memory_gib_per_node": "--memory-gib", "price_usd_per_gpu_hour": "--price-usd-per-gpu-hour",
    "price_usd_per_node_hour": "--price-usd-per-node-hour", "checkpoint_dir": "--checkpoint-dir", "job_prefix": "--job-prefix",
}  # fmt: skip


def _in_words(err: dict) -> str:
    """One pydantic error as a short sentence about the value."""
    ctx = err.get("ctx") or {}
    if err["type"] == "greater_than_equal":
        return f"must be {ctx['ge']} or more"
    if err["type"] == "greater_than":
        return f"must be more than {ctx['gt']}"
    if err["type"] == "less_than_equal":
        return f"must be {ctx['le']} or less"
    return err["msg"].removeprefix("Value error, ")


@clusters_app.command("remove")
def remove(
    name: str = typer.Argument(...),
    missing_ok: bool = typer.Option(False, "--missing-ok", help="No error when it is not declared."),
) -> None:
    """Forget a declared cluster (the cluster itself is not touched)."""
    from launcher.clusters import remove_cluster
    from launcher.cli.render import info

    if remove_cluster(name, missing_ok=missing_ok):
        info(f"removed {name}")


def _rows(check_with_sky: bool) -> list[dict]:
    from launcher.clusters import load_clusters
    from launcher.clusters.offers import reachability

    rows = []
    clusters = load_clusters()
    sky = None
    if check_with_sky and clusters.clusters:
        from launcher.executors.sky_server import sky_check

        sky = sky_check(sorted({c.kind for c in clusters.clusters}))
    for c in clusters.clusters:
        r = reachability(c)
        enabled, reason = r.enabled, r.reason
        if sky is not None and enabled:
            enabled, reason = sky.get(c.infra, (False, f"SkyPilot does not list {c.infra}"))
        rows.append({**c.model_dump(), "enabled": enabled, "reason": reason})
    return rows


def _show(rows: list[dict], as_json: bool) -> None:
    from launcher.cli.render import info, print_json, print_table

    if as_json:
        print_json(rows)
        return
    if not rows:
        info("no clusters declared (launcher clusters add NAME --infra slurm/<cluster>)")
        return
    print_table(
        None,
        ["NAME", "INFRA", "GPUS", "NODES", "$/GPU-H", "PREEMPTIBLE", "ENABLED", "REASON"],
        [
            [r["name"], r["infra"], f"{r['gpu']}:{r['gpus_per_node']}" if r["gpu"] else "-", r["nodes"],
             f"{r['price_usd_per_gpu_hour']:.4f}", "yes" if r["preemptible"] else "no", "yes" if r["enabled"] else "no", r["reason"]]  # fmt: skip
            for r in rows
        ],
    )


@clusters_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="Print JSON (a list).")) -> None:
    """Declared clusters and whether SkyPilot's config names them."""
    _show(_rows(False), as_json)


@clusters_app.command("check")
def check(as_json: bool = typer.Option(False, "--json", help="Print JSON (a list).")) -> None:
    """Ask SkyPilot (`sky check`) which declared clusters it can reach now."""
    rows = _rows(True)
    _show(rows, as_json)
    if any(not r["enabled"] for r in rows):
        raise typer.Exit(5)
