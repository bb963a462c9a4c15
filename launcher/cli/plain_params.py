"""Plain option values without pydantic, for the quick commands (`offers`, `launch`).

typer 0.29 converts every option value through a pydantic TypeAdapter built on first use:
importing pydantic and building the adapters is about a third of `launcher offers`' run here
(bench/bench_offers.py), for values that are plain strings, whole numbers and decimals. For
those, `install()` gives typer's parameters a converter that returns exactly what the adapter
would, and hands everything else (signs, exponents, bounds, enums, files, a value of another
type) to typer's own adapter, so its conversions and error messages are unchanged.

It reaches into typer's runtime-coercion layer (`_TyperParameter.get_runtime_param`,
`typer._coercion.RuntimeParam`): when those are missing (another typer), it does nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

_WHOLE = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
_installed = [False]


def plain_value(annotation: Any, info: Any, value: Any) -> tuple[bool, Any]:
    """(True, converted) when `value` is plainly of `annotation`, else (False, None): ask typer."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (None,)
        if not isinstance(value, (list, tuple)):
            return False, None
        out = []
        for v in value:
            ok, got = plain_value(item, info, v)
            if not ok:
                return False, None
            out.append(got)
        return True, out
    if getattr(info, "parser", None) is not None:
        return False, None
    if annotation is str:
        return (True, value) if type(value) is str else (False, None)
    if annotation in (int, float):
        if getattr(info, "min", None) is not None or getattr(info, "max", None) is not None:
            return False, None
        if type(value) is annotation:
            return True, value
        if type(value) is str and (_WHOLE if annotation is int else _DECIMAL).fullmatch(value):
            return True, annotation(value)
        return False, None
    if annotation is Path and type(value) is str and _plain_path_option(info):
        return True, Path(value)
    return False, None


def _plain_path_option(info: Any) -> bool:
    """A Path option with none of typer's checks (exists, file/dir, readable, resolve, dash)."""
    return (
        not getattr(info, "exists", True)
        and getattr(info, "file_okay", False)
        and getattr(info, "dir_okay", False)
        and not getattr(info, "writable", True)
        and getattr(info, "readable", False)
        and not getattr(info, "resolve_path", True)
        and not getattr(info, "allow_dash", True)
        and getattr(info, "path_type", 1) is None
    )


def install() -> None:
    """Route typer's option conversion through `plain_value` first (idempotent)."""
    if _installed[0]:
        return
    try:
        from dataclasses import dataclass

        from typer import _coercion
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - a typer without this layer
        return
    if not hasattr(_TyperParameter, "get_runtime_param") or not hasattr(_coercion, "build_runtime_param"):
        return  # pragma: no cover

    @dataclass(frozen=True)
    class PlainRuntimeParam(_coercion.RuntimeParam):
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ok, got = plain_value(self.annotation, self.parameter_info, value)
            if ok:
                return got
            return _coercion.build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self):
        if self._runtime_param is None:
            d = self.type_descriptor
            if d.file_annotation is None:
                self._runtime_param = PlainRuntimeParam(d.parameter_info, d.annotation, d)
            else:
                self._runtime_param = _coercion.build_runtime_param(d)
        return self._runtime_param

    _TyperParameter.get_runtime_param = get_runtime_param
    _installed[0] = True
