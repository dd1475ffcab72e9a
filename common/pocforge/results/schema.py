"""The result schema: versioned pydantic models of every file a run folder holds.

Each document carries ``kind`` and ``schema_version``. :func:`load_document` reads a file
of any known version and migrates it, one step at a time, to the current one, so a run
written by an older kit still opens. :func:`export_json_schemas` writes the JSON Schema of
every kind to ``results/schema/`` (a test keeps those files in sync with the models).

The models live by what they describe: the run's own files in
:mod:`~pocforge.results.run_schema`, the stages' inputs in
:mod:`~pocforge.results.stage_schema`, the expert-parallel benchmark in
:mod:`~pocforge.results.ep_schema`; their base in :mod:`~pocforge.results.base`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pocforge.results.base import Doc, SchemaError, T
from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.run_schema import Provenance, RunManifest
from pocforge.results.stage_schema import (
    ClusterHealth,
    CollectiveResult,
    KernelResults,
    ServingResult,
    TrainingResult,
)

MODELS: dict[str, type[Doc]] = {
    m.model_fields["kind"].default: m
    for m in (
        RunManifest,
        Provenance,
        ServingResult,
        CollectiveResult,
        ClusterHealth,
        KernelResults,
        TrainingResult,
        EpAllToAllResult,
    )
}


def current_version(kind: str) -> int:
    return MODELS[kind].model_fields["schema_version"].default


def _manifest_v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """v1 (first draft of the store) kept ``files`` as path -> sha256 and the kit's git
    facts flat (``git_sha``, ``git_dirty``, ``kit_version``); v2 adds sizes and open files."""
    out = dict(doc)
    out["files"] = {
        p: {"sha256": h, "bytes": 0, "open": h is None} for p, h in doc["files"].items()
    }
    out["kit"] = {
        "version": out.pop("kit_version", "unknown"),
        "git_sha": out.pop("git_sha", None),
        "git_dirty": out.pop("git_dirty", None),
    }
    out["schema_version"] = 2
    return out


# (kind, from_version) -> function returning the document at from_version + 1
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("pocforge-run", 1): _manifest_v1_to_v2,
}


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a document of a known kind to the current schema version."""
    kind = doc.get("kind")
    if kind not in MODELS:
        raise SchemaError(f"unknown result kind {kind!r}")
    version = doc.get("schema_version")
    target = current_version(kind)
    if not isinstance(version, int) or version > target:
        raise SchemaError(
            f"{kind} schema_version {version!r} is not one this kit reads (newest: {target})"
        )
    while version < target:
        step = MIGRATIONS.get((kind, version))
        if step is None:
            raise SchemaError(f"no migration for {kind} from schema_version {version}")
        doc = step(doc)
        version = doc["schema_version"]
    return doc


def parse_document(data: Any, model: type[T], where: str = "document") -> T:
    """Validate ``data`` as ``model`` after migrating it; raises :class:`SchemaError`."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: expected a JSON object")
    data = migrate({"kind": model.model_fields["kind"].default, **data})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise SchemaError(f"{where}: {loc}: {first['msg']}") from None


def load_document(path: Path, model: type[T]) -> T:
    """Read a JSON file as ``model`` (migrating older versions); raises :class:`SchemaError`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SchemaError(f"{path}: not valid JSON: {exc}") from None
    return parse_document(data, model, str(path))


def json_schemas() -> dict[str, dict[str, Any]]:
    """kind -> JSON Schema of its current version."""
    return {kind: model.model_json_schema() for kind, model in MODELS.items()}


def export_json_schemas(folder: Path) -> list[Path]:
    """Write ``<kind>.schema.json`` for every kind into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for kind, schema in json_schemas().items():
        path = folder / f"{kind}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        out.append(path)
    return out
