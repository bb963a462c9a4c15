"""`launcher infra preview|up` flags checked against each other and the catalog before anything
runs: an instance type whose GPUs contradict --gpus, a zone outside --region (exit 2); the one
GPU shape a cluster has."""

from __future__ import annotations

from pathlib import Path

from launcher.errors import BadInputError, UnknownNameError
from pricing.clouds import STACK_CLOUDS


def check_cloud(cloud: str) -> None:
    """Only clouds with a Pulumi program have stacks."""
    if cloud not in STACK_CLOUDS:
        raise UnknownNameError("cloud", cloud, STACK_CLOUDS, extra=f" for infra (Pulumi programs exist for {' and '.join(STACK_CLOUDS)})")


def parse_cluster_gpus(value: str | None) -> tuple[str | None, int]:
    """One GPU shape (or none), parsed by `pricing.gpus.parse_gpus`."""
    if not value or value.lower() == "none":
        return None, 0
    from pricing.gpus import parse_gpus

    shapes = parse_gpus(value)
    if len(shapes) != 1:
        raise BadInputError(f"--gpus {value!r}: a cluster has one GPU shape, e.g. V100:1")
    return shapes[0].name, shapes[0].count


def check_flags(*, cloud: str, region: str, zone: str | None, instance_type: str, gpus: tuple[str | None, int],
                catalog_dir: Path | None) -> None:  # fmt: skip
    if zone and not zone.startswith(region):
        raise BadInputError(f"--zone {zone} is not in --region {region}", hint=f"use a zone of {region} (e.g. {region}{'a' if cloud == 'aws' else '-a'}) or the region of {zone}")
    from pricing.catalog import load_catalog

    offers = load_catalog(catalog_dir, use_parsed_cache=False).offers  # a dry run writes nothing
    rows = offers[(offers["cloud"] == cloud) & (offers["instance_type"] == instance_type)]
    if rows.empty:
        return  # not in the catalog (a new or custom type): nothing to contradict
    if not (rows["region"] == region).any():
        known = sorted(set(rows["region"].astype(str)))
        raise BadInputError(f"{cloud} {instance_type} is not offered in {region} (catalog)", hint=f"regions with it: {', '.join(known[:8])}")
    acc = rows["accelerator"].iloc[0]
    count = int(rows["accelerator_count"].iloc[0])
    has = f"{acc}:{count}" if isinstance(acc, str) and acc else "no GPU"
    name, n = gpus
    if name is None:
        return
    from pricing.gpus import normalize_gpu_name

    want = normalize_gpu_name(name) or name
    if has == "no GPU" or want != acc or n != count:
        raise BadInputError(f"--instance-type {instance_type} has {has}, not {name}:{n}", hint=f"drop --gpus, or use --gpus {has}" if has != "no GPU" else "drop --gpus")
