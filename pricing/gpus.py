"""GPU names and shapes: normalization (`a100` -> `A100`), families, and `--gpus` parsing.

Names follow SkyPilot's accelerator names (catalogs/common/accelerators.csv). Some clouds sell
the same chip under a variant name (GCP `H100-MEGA`, RunPod `H100-SXM`, `A100-80GB-SXM`,
`H200-SXM`): a request for the family (`H100`) matches every variant, a request for a variant
(`H100-MEGA`) matches only that variant. `H100-NVL` (94 GB, PCIe pair) is its own family.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pricing.errors import PricingInputError, UnknownNameError
from pricing.models import GpuRequest

# SkyPilot's accelerator names (common/accelerators.csv, GPU rows), plus a few common ones.
KNOWN_GPUS: tuple[str, ...] = (
    "A10", "A100", "A100-80GB", "A100-80GB-SXM", "A10G", "A40", "A4000", "A6000", "B200",
    "GH200", "H100", "H100-MEGA", "H100-NVL", "H100-NVLINK", "H100-SXM", "H200", "H200-SXM",
    "K80", "L4", "L40", "L40S", "M4000", "M60", "MI300X", "P100", "P4", "P4000", "RTX3060",
    "RTX3080", "RTX3090", "RTX4000-Ada", "RTX4060", "RTX4080", "RTX4090", "RTX5060", "RTX5090",
    "RTX6000", "RTX6000-Ada", "RTXA4000", "RTXA4500", "RTXA5000", "RTXA6000", "T4", "T4g",
    "V100", "V100-32GB", "A800", "RTXPRO6000", "B300", "GB200", "MI325X", "MI355X", "Trainium",
    "Inferentia",
)  # fmt: skip

# Variant name -> family it belongs to (same chip, different packaging or interconnect).
_FAMILY: dict[str, str] = {
    "H100-SXM": "H100",
    "H100-MEGA": "H100",
    "H100-NVLINK": "H100",
    "A100-80GB-SXM": "A100-80GB",
    "H200-SXM": "H200",
}

# Common spellings people type -> canonical name (keys are lowercase, without spaces/underscores).
_ALIASES: dict[str, str] = {
    "a100-40gb": "A100",
    "a10040gb": "A100",
    "a100-80g": "A100-80GB",
    "a10080gb": "A100-80GB",
    "h100-80gb": "H100",
    "h10080gb": "H100",
    "h100sxm": "H100-SXM",
    "h100-sxm5": "H100-SXM",
    "h100mega": "H100-MEGA",
    "h100nvl": "H100-NVL",
    "v100-16gb": "V100",
    "v10032gb": "V100-32GB",
    "rtx-4090": "RTX4090",
    "rtx-3090": "RTX3090",
    "rtxa6000": "RTXA6000",
    "a6000": "A6000",
}

# Memory per GPU (GiB) for catalogs whose GpuInfo carries no size (RunPod writes a bare name).
GPU_MEMORY_GIB: dict[str, float] = {
    "A10": 24, "A100": 40, "A100-80GB": 80, "A100-80GB-SXM": 80, "A10G": 24, "A40": 48,
    "A4000": 16, "A6000": 48, "B200": 180, "GH200": 96, "H100": 80, "H100-MEGA": 80,
    "H100-NVL": 94, "H100-NVLINK": 80, "H100-SXM": 80, "H200": 141, "H200-SXM": 141, "K80": 12,
    "L4": 24, "L40": 48, "L40S": 48, "MI300X": 192, "P100": 16, "P4": 8, "RTX3090": 24,
    "RTX4090": 24, "RTX6000-Ada": 48, "RTXA4000": 16, "RTXA4500": 20, "RTXA5000": 24,
    "RTXA6000": 48, "T4": 16, "V100": 16, "V100-32GB": 32, "RTX4000-Ada": 20, "RTX5090": 32,
}  # fmt: skip

_SHAPE_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9 _.\-]*?)\s*(?::\s*([^:]*?)\s*)?$")


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip()).lower()


def normalize_gpu_name(name: str, known: Iterable[str] = ()) -> str | None:
    """Canonical spelling of a GPU name, or None when it is not a known name.

    `known` adds names (e.g. those found in the loaded catalog) to the built-in list.
    """
    k = _key(name)
    table = {_key(n): n for n in (*KNOWN_GPUS, *known)}
    if k in table:
        return table[k]
    compact = k.replace("-", "")
    if k in _ALIASES:
        return _ALIASES[k]
    if compact in _ALIASES:
        return _ALIASES[compact]
    for n_key, n in table.items():
        if n_key.replace("-", "") == compact:
            return n
    return None


def canonical_catalog_name(raw: str) -> str:
    """Normalize a name read from a catalog; unknown names keep their spelling (no spaces)."""
    return normalize_gpu_name(raw) or re.sub(r"\s+", "", raw.strip())


def gpu_family(name: str) -> str:
    """The family a (canonical) name belongs to; a name that is not a variant is its own family."""
    return _FAMILY.get(name, name)


def parse_gpus(specs: str | Sequence[str], known: Iterable[str] = ()) -> tuple[GpuRequest, ...]:
    """Parse `--gpus` values: `H100:8`, `H100` (= 1), `A100|H100:8`, `A100:8,H100:8`, or a list.

    In `A|B:N` a name without a count takes the count written at the end of its alternative group.
    Raises PricingInputError for malformed shapes and counts <= 0, UnknownNameError for unknown names.
    """
    if isinstance(specs, str):
        specs = [specs]
    known = tuple(known)
    out: list[GpuRequest] = []
    for spec in specs:
        if not spec or not spec.strip():
            raise PricingInputError("empty GPU shape", hint="use NAME[:COUNT], e.g. H100:8")
        for group in spec.split(","):
            out.extend(_parse_group(group, spec, known))
    # Keep order, drop duplicates.
    return tuple(dict.fromkeys(out))


def _parse_group(group: str, spec: str, known: tuple[str, ...]) -> list[GpuRequest]:
    parts = [p for p in group.split("|")]
    parsed: list[tuple[str, int | None]] = []
    for part in parts:
        m = _SHAPE_RE.match(part)
        if not part.strip() or not m:
            raise PricingInputError(f"malformed GPU shape {spec!r}", hint="use NAME[:COUNT], e.g. H100:8 or 'A100|H100:8'")
        name, count_s = m.group(1), m.group(2)
        count: int | None = None
        if count_s is not None:
            count = _parse_count(count_s, spec)
        canon = normalize_gpu_name(name, known)
        if canon is None:
            raise UnknownNameError("GPU", name.strip(), (*KNOWN_GPUS, *known))
        parsed.append((canon, count))
    default = parsed[-1][1] or 1
    return [GpuRequest(name, count if count is not None else default) for name, count in parsed]


def _parse_count(count_s: str, spec: str) -> int:
    try:
        value = float(count_s)
    except ValueError:
        raise PricingInputError(f"malformed GPU count in {spec!r}", hint="the count must be a whole number >= 1") from None
    if value <= 0:
        raise PricingInputError(f"GPU count must be at least 1 (a whole number >= 1) in {spec!r}")
    if value != int(value):
        raise PricingInputError(f"GPU count must be a whole number >= 1 in {spec!r}")
    return int(value)
