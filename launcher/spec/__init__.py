"""Task specs: SkyPilot task YAML plus our `launcher:` block.

    from launcher.spec import load_spec
    loaded = load_spec("task_specs/train.yaml")    # SpecError (exit 2) with line + did-you-mean
    loaded.spec.resources.alternatives()            # base block x any_of/ordered entries
"""

from launcher.spec.durations import format_duration, parse_duration_seconds
from launcher.spec.loader import LoadedSpec, load_spec, load_spec_text
from launcher.spec.models import (
    CheckpointSpec,
    LauncherBlock,
    Placement,
    ResourceFields,
    ResourcesSpec,
    TaskSpec,
)

__all__ = [
    "CheckpointSpec",
    "LauncherBlock",
    "LoadedSpec",
    "Placement",
    "ResourceFields",
    "ResourcesSpec",
    "TaskSpec",
    "format_duration",
    "load_spec",
    "load_spec_text",
    "parse_duration_seconds",
]
