"""Read a task spec file: YAML -> TaskSpec, with errors that name the field, the line and a
"did you mean". Nothing here writes anywhere; callers validate before they touch state.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher.bounded_read import read_bounded_text, yaml_load, yaml_load_all
from launcher.errors import BadInputError, SpecError, did_you_mean
from launcher.spec.models import TaskSpec
from launcher.spec.yaml_lines import line_for, line_map

MAX_ERRORS_SHOWN = 5


@dataclass(frozen=True)
class LoadedSpec:
    spec: TaskSpec
    text: str  # the file as written (hashed into provenance)
    path: Path | None  # None when read from a string
    base_dir: Path  # relative workdir / file_mounts / data paths resolve against this

    @property
    def label(self) -> str:
        return str(self.path) if self.path else "<spec>"

    def resolve(self, p: str) -> Path:
        """A path from the spec: ~ expanded, relative paths against the spec's directory."""
        q = Path(p).expanduser()
        return q if q.is_absolute() else (self.base_dir / q).resolve()

    @property
    def workdir(self) -> Path | None:
        return self.resolve(self.spec.workdir) if self.spec.workdir else None

    def sky_config(self) -> dict[str, Any]:
        """What we would hand to SkyPilot: the YAML without our `launcher:` block and without
        `infra: local` (our embedded backend, unknown to SkyPilot) alternatives."""
        data = yaml_load(self.text, self.label) or {}
        data.pop("launcher", None)
        res = data.get("resources")
        if isinstance(res, dict):
            if _is_local(res):
                res.pop("infra", None)
                res.pop("cloud", None)
            for key in ("any_of", "ordered"):
                if isinstance(res.get(key), list):
                    kept = [e for e in res[key] if not (isinstance(e, dict) and _is_local(e))]
                    if kept:
                        res[key] = kept
                    else:
                        res.pop(key)
        return data


def _is_local(d: dict) -> bool:
    return str(d.get("infra") or d.get("cloud") or "").strip().lower() == "local"


def load_spec(path: Path | str) -> LoadedSpec:
    path = Path(path)
    if not path.exists():
        raise SpecError(f"task spec {str(path)!r} does not exist")
    if path.is_dir():
        raise SpecError(f"task spec {str(path)!r} is a directory, not a YAML file")
    try:
        text = read_bounded_text(path, "task spec")
    except BadInputError as e:
        raise SpecError(e.message) from None
    return load_spec_text(text, path=path)


def load_spec_text(text: str, *, path: Path | None = None, base_dir: Path | None = None) -> LoadedSpec:
    label = str(path) if path else "<spec>"
    try:
        docs = yaml_load_all(text, label)
    except BadInputError as e:
        raise SpecError(e.message) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{label}:{where}: not valid YAML: {problem}") from None
    docs = [d for d in docs if d is not None]
    if not docs:
        raise SpecError(f"{label}: the task spec is empty")
    if len(docs) > 1:
        raise SpecError(f"{label}: several YAML documents; a task spec is one document (pipelines are not supported)")
    data = docs[0]
    if not isinstance(data, dict):
        raise SpecError(f"{label}: a task spec is a mapping of fields (name, resources, run, ...), got {type(data).__name__}")
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_format_errors(e, text, label)) from None
    base = base_dir or (path.resolve().parent if path else Path.cwd())
    return LoadedSpec(spec=spec, text=text, path=path, base_dir=base)


# ---- error formatting -----------------------------------------------------------------------


def _format_errors(err: ValidationError, text: str, label: str) -> str:
    lines = line_map(text)
    seen: set[tuple] = set()
    msgs: list = []
    for e in err.errors(include_url=False):
        loc = _clean_loc(e["loc"])
        key = (loc, e["type"] if e["type"] == "extra_forbidden" else "")
        if key in seen:
            continue
        seen.add(key)
        line = line_for(lines, loc)
        msgs.append((line, f"line {line}: {_dotted(loc) or '(top level)'}: {_message(e, loc)}"))
    msgs = [m for _, m in sorted(msgs, key=lambda lm: lm[0])]
    shown = msgs[:MAX_ERRORS_SHOWN]
    more = f"\n  ... and {len(msgs) - len(shown)} more" if len(msgs) > len(shown) else ""
    if len(shown) == 1:
        return f"{label}: {shown[0]}"
    return f"{label}: {len(msgs)} problems:\n  " + "\n  ".join(shown) + more


def _clean_loc(loc: tuple) -> tuple:
    """Drop pydantic's union-branch labels ('str', 'dict[str,int]', 'function-after[...]')."""
    out = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part in {"str", "int", "float", "bool", "list", "dict"}):
            continue
        out.append(part)
    return tuple(out)


def _dotted(loc: tuple) -> str:
    s = ""
    for p in loc:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


def _message(e: dict, loc: tuple) -> str:
    if e["type"] == "extra_forbidden":
        known = _known_keys(loc[:-1])
        hint = did_you_mean(str(loc[-1]), known) if known else None
        return "unknown field" + (f"; {hint}" if hint else (f" (known: {', '.join(sorted(known))})" if known else ""))
    msg = e["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if e["type"] == "missing":
        return "required field is missing"
    return msg


def _known_keys(loc: tuple) -> list[str]:
    """Field names of the model found at `loc` (walking TaskSpec's annotations)."""
    model: Any = TaskSpec
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return []
        model = _model_in(model.model_fields[part].annotation)
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
