"""Load a POC spec: YAML -> includes -> ${ENV} secrets -> models -> cross-field rules.

Every problem is collected and raised at once as ``SpecError``; nothing here raises
anything else for any input.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr, ValidationError

from pocforge.paths import pocs_dir
from pocforge.spec.errors import Problem, SpecError
from pocforge.spec.rules import check_rules
from pocforge.spec.schema import PocSpec
from pocforge.spec.source import FieldPath, Source, dotted, interpolate_env, load_source

SPEC_FILE = "poc.yaml"


def resolve_spec_path(target: str | Path) -> Path:
    """``demo`` -> ``pocs/demo/poc.yaml``; a folder -> its ``poc.yaml``; a file as given."""
    path = Path(target)
    if path.is_dir():
        return path / SPEC_FILE
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = pocs_dir() / str(target) / SPEC_FILE
    if candidate.exists():
        return candidate
    known = sorted(p.parent.name for p in pocs_dir().glob(f"*/{SPEC_FILE}"))
    hint = difflib.get_close_matches(str(target), known, n=1)
    msg = f"no POC named {target!r}"
    msg += f"; did you mean {hint[0]!r}?" if hint else f" (POCs: {', '.join(known) or 'none'})"
    raise SpecError([Problem(None, None, "", msg)])


def load_poc(target: str | Path) -> PocSpec:
    """The validated spec of a POC name, folder or file; raises ``SpecError``."""
    return load_spec(resolve_spec_path(target))


def load_spec(file: Path) -> PocSpec:
    file = Path(file)
    source = load_source(file)
    problems, unset = interpolate_env(source, secret_paths(), secret_paths("references"))
    try:
        spec = PocSpec.model_validate(source.data)
    except ValidationError as exc:
        raise SpecError(problems + [_problem(source, err) for err in exc.errors()]) from None
    if problems:
        raise SpecError(problems)

    folder = file.resolve().parent.name
    if spec.poc.name != folder and folder != "_template":
        problems.append(
            _locate(
                source, ("poc", "name"), f"{spec.poc.name!r} must equal the folder name {folder!r}"
            )
        )
    spec._file = file.resolve()
    spec._unset_secrets = unset
    problems += [_locate(source, path, message) for path, message in check_rules(spec)]
    if problems:
        raise SpecError(problems)
    spec._hash = hashlib.sha256(json.dumps(public_dump(spec), sort_keys=True).encode()).hexdigest()
    return spec


def public_dump(spec: PocSpec) -> dict[str, Any]:
    """The resolved spec as JSON-ready data, secrets masked."""
    return spec.model_dump(mode="json", exclude_none=False)


def _locate(source: Source, path: FieldPath, message: str) -> Problem:
    file, line = source.origin(path) or (source.files[0] if source.files else None, None)
    return Problem(file, line, dotted(path), message)


# --------------------------------------------------------------------------- pydantic errors


def _problem(source: Source, error: dict[str, Any]) -> Problem:
    path = _data_path(source.data, error["loc"])
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        allowed = _fields_at(source.data, path[:-1])
        message = (
            f"unknown field {path[-1]!r}" + _suggest(str(path[-1]), allowed) + _allowed(allowed)
        )
    elif kind == "missing":
        message = "required field is missing"
    elif kind in ("literal_error", "enum"):
        options = [
            o.strip().strip("'") for o in ctx.get("expected", "").replace(" or ", ", ").split(",")
        ]
        message = f"{value!r} is not allowed" + _suggest(str(value), options) + _allowed(options)
    elif kind == "union_tag_invalid":
        options = [o.strip().strip("'") for o in str(ctx.get("expected_tags", "")).split(",")]
        message = (
            f"kind {ctx.get('tag')!r} is not known"
            + _suggest(str(ctx.get("tag")), options)
            + _allowed(options)
        )
    elif kind == "union_tag_not_found":
        message = (
            f"needs '{ctx.get('discriminator', 'kind').strip(chr(39))}:' to say which kind it is"
        )
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        message = f"should be a mapping of fields (got {value!r})"
    elif kind == "value_error":
        message = str(ctx.get("error", error["msg"]))
    else:
        message = error["msg"][0].lower() + error["msg"][1:]
        if not isinstance(value, dict | list) and "input" in error:
            message += f" (got {value!r})"
    return _locate(source, path, message)


def _data_path(data: Any, loc: tuple) -> FieldPath:
    """Keep the parts of pydantic's error location that index the data, plus the last part
    (a missing or unknown key); union tags and validator names fall out."""
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if (
            isinstance(node, dict)
            and part in node
            or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node))
        ):
            node = node[part]
            path.append(part)
        elif index == len(loc) - 1:
            path.append(part)
    return tuple(path)


def _fields_at(data: Any, path: FieldPath) -> list[str]:
    """Field names of the model that validates ``path`` (following the data through unions)."""
    model: Any = PocSpec
    node = data
    for part in path:
        node = node[part] if isinstance(node, dict | list) else None
        model = _step(model, part, node)
        if model is None:
            return []
    return (
        list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    )


def _step(annotation: Any, part: str | int, node: Any) -> Any:
    """The annotation one level below ``annotation`` at key ``part`` holding ``node``."""
    annotation = _unwrap(annotation, node)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        return _unwrap(field.annotation, node) if field else None
    origin = typing.get_origin(annotation)
    if origin in (list, dict) and typing.get_args(annotation):
        return _unwrap(typing.get_args(annotation)[-1], node)
    return None


def _unwrap(annotation: Any, node: Any) -> Any:
    """Strip Annotated/Optional; pick the union member whose ``kind`` matches the data."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
            kind = node.get("kind") if isinstance(node, dict) else None
            chosen = [
                m
                for m in models
                if "kind" in m.model_fields
                and kind in typing.get_args(m.model_fields["kind"].annotation)
            ]
            annotation = (chosen or models or members)[0]
        else:
            return annotation


def _suggest(word: str, options: list[str]) -> str:
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def _allowed(options: list[str]) -> str:
    return f" (allowed: {', '.join(options)})" if options else ""


# --------------------------------------------------------------------------- secrets


def secret_paths(marker: str = "secret") -> set[FieldPath]:
    """Field paths (``*`` for list items) whose model field is a secret; with
    ``marker="references"``, the mappings whose values may be secret references (their
    paths end in ``*``, any key)."""
    found: set[FieldPath] = set()

    def walk(model: type[BaseModel], prefix: FieldPath, seen: frozenset) -> None:
        for name, field in model.model_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            if marker == "references" and extra.get("references"):
                found.add((*prefix, name, "*"))
            elif marker == "secret" and (
                extra.get("secret") or _mentions(field.annotation, SecretStr)
            ):
                found.add((*prefix, name))
            for inner, is_list in _models_in(field.annotation):
                if inner not in seen:
                    walk(
                        inner, (*prefix, name, "*") if is_list else (*prefix, name), seen | {inner}
                    )

    walk(PocSpec, (), frozenset({PocSpec}))
    return found


def _mentions(annotation: Any, target: type) -> bool:
    return annotation is target or any(_mentions(a, target) for a in typing.get_args(annotation))


def _models_in(annotation: Any, is_list: bool = False) -> list[tuple[type[BaseModel], bool]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, is_list)]
    origin = typing.get_origin(annotation)
    nested = is_list or origin is list
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg, nested)]
