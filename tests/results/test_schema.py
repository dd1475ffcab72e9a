"""The result schema: versioned, exported, older versions migrated on read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.results.base import SchemaError
from pocforge.results.run_schema import RunManifest
from pocforge.results.schema import json_schemas, parse_document
from pocforge.results.store import Run

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


def test_exported_schemas_are_current(repo: Path) -> None:
    """results/schema/ holds the JSON Schema of every kind (`pocforge results schema`)."""
    for kind, schema in json_schemas().items():
        file = repo / "results" / "schema" / f"{kind}.schema.json"
        assert file.exists(), f"{file} missing: run `pocforge results schema`"
        assert json.loads(file.read_text()) == schema, (
            f"{file} is stale: run `pocforge results schema`"
        )


def test_manifest_v1_is_migrated(demo_run: Run) -> None:
    """A v1 manifest (files as path -> sha256, flat git facts) opens as v2 and verifies."""
    m = json.loads((demo_run.path / "run.json").read_text())
    kit = m.pop("kit")
    v1 = {
        **m,
        "schema_version": 1,
        "files": {p: e["sha256"] for p, e in m["files"].items()},
        "kit_version": kit["version"],
        "git_sha": kit["git_sha"],
        "git_dirty": kit["git_dirty"],
    }
    (demo_run.path / "run.json").write_text(json.dumps(v1))
    opened = Run.open(demo_run.path).manifest
    assert opened.schema_version == 2 and opened.kit.git_sha == kit["git_sha"]
    from pocforge.results.verify import verify

    assert verify(demo_run.path).ok


def test_newer_or_broken_documents_are_one_line_errors() -> None:
    with pytest.raises(SchemaError, match="schema_version 9"):
        parse_document({"schema_version": 9}, RunManifest)
    with pytest.raises(SchemaError, match="poc"):
        parse_document({"schema_version": 2}, RunManifest)
