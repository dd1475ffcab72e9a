"""Generate ``pocs/SPEC.md``, the field reference, from the models (a test keeps it in sync)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from pocforge.spec.schema import PocSpec

HEADER = """# `poc.yaml` reference

Generated from the models of `common/pocforge/spec/` (`schema.py` and its `*_schema.py` sections) by `pocforge schema --markdown --out pocs/SPEC.md`
(`make spec-docs`); `tests/spec/test_docs.py` fails when this page is stale.
Unknown keys are errors. Paths are relative to the POC folder. `include:` inherits from
other specs (deep merge; lists replace). `${ENV}` is allowed only in fields marked *secret*.
Acceptance criteria read `<metric path> <op> <threshold>`, e.g. `serving.chat.ttft_ms.p99 <= 2000`;
the metrics and their definitions are in `common/pocforge/metrics.py`.
"""


def spec_markdown() -> str:
    sections: list[str] = [HEADER]
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("(top level)", PocSpec)]
    while queue:
        where, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        doc = (model.__doc__ or "").strip().splitlines()
        lines = [
            f"## `{model.__name__}`",
            "",
            f"Used at: `{where}`." + (f" {doc[0]}" if doc and model is PocSpec else ""),
            "",
        ]
        lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            path = name if model is PocSpec else f"{where}.{name}"
            for inner in _models(field.annotation):
                queue.append((path, inner))
            secret = " *secret*" if _is_secret(field) else ""
            lines.append(
                f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {field.description or ''}{secret} |"
            )
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


def _is_secret(field: Any) -> bool:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return bool(extra.get("secret"))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        return f"`{value!r}`" if not isinstance(value, BaseModel) else "(defaults)"
    return "—" if field.default in (None, PydanticUndefined) else f"`{field.default!r}`"


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        text = " or ".join(_type(a) for a in members)
        return f"{text} (optional)" if len(members) < len(args) else text
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping to {_type(args[1])}" if args else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[`{annotation.__name__}`](#{annotation.__name__.lower()})"
    if annotation is SecretStr:
        return "string"
    names = {int: "integer", float: "number", str: "string", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]
