"""Loading a YAML config file into a pydantic model, with one readable error.

Shared by every user-edited file (reaper policy, budgets, risk overrides): YAML syntax errors name
the line, a non-mapping is refused, and the first validation error names the field path, with a
"did you mean" for unknown keys.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from launcher.bounded_read import read_bounded_text, yaml_load
from launcher.errors import BadInputError, SpecError, did_you_mean

M = TypeVar("M", bound=BaseModel)


def load_yaml_model(path: Path, model: type[M], *, missing_ok: bool = False, what: str = "file") -> M:
    """Parse and validate `path`; a missing file is an error unless `missing_ok` (then defaults).
    An empty file gives the defaults."""
    path = Path(path)
    if not path.is_file():
        if missing_ok:
            return defaults(model)
        raise BadInputError(f"{what} not found: {path}")
    try:
        raw = yaml_load(read_bounded_text(path, what), str(path))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if raw is None:
        return defaults(model)
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the {what} must be a mapping, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise validation_error(path, model, e) from None


def defaults(model: type[M]) -> M:
    """The model with its defaults (a missing or empty file). A model of an optional file that
    declares `defer_build` builds its validator on first use, and its defaults are valid by
    construction (tests/test_config_file.py checks each against `model()`), so a launch without
    budgets.yaml, clusters.yaml or config.yaml builds none of their schemas."""
    if model.model_config.get("defer_build"):
        return model.model_construct()
    return model()


def validation_error(path: Path, model: type[BaseModel], e: ValidationError) -> SpecError:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        known = fields_at(model, err["loc"][:-1])
        return SpecError(f"{path}: unknown field {loc!r}", hint=did_you_mean(str(err["loc"][-1]), known))
    msg = err["msg"].removeprefix("Value error, ")
    return SpecError(f"{path}: {loc}: {msg}")


def fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model found by walking `loc` (field names, list indexes and dict
    keys) from `model`."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str) and part in current.model_fields:
            current = current.model_fields[part].annotation
            continue
        origin = typing.get_origin(current)
        if origin in (list, tuple, set, frozenset):
            current = typing.get_args(current)[0]
        elif origin is dict:
            current = typing.get_args(current)[1]
    current = _unwrap(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _unwrap(ann: Any) -> Any:
    """Optional[X] / X | None -> X (the first BaseModel among union members, else unchanged)."""
    args = typing.get_args(ann)
    if args and typing.get_origin(ann) not in (list, tuple, set, frozenset, dict):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            return models[0]
    return ann
