"""Importers: other tools' result files -> our schema, in a run folder of their own.

``pocforge import FILE… --format TOOL [--as POC/RUN]`` parses the files with the tool's
module here, keeps the tool's metric definitions and the list of where they differ from
ours (:class:`~pocforge.results.schema.DefinitionDifference`), and writes a run:

- ``serving/<workload>/result.json`` (``ServingResult``) and, where the tool kept
  per-request data, ``serving/<workload>/requests-<point>.jsonl`` in the serving
  benchmark's record format;
- ``collectives/<collective>.json`` (``CollectiveResult``);
- ``imported/<original file>``: the input, byte for byte (secrets scrubbed).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pocforge.atomic import sha256_file
from pocforge.results.importers.common import Imported, ResultImportError
from pocforge.results.store import Run, RunStore

FORMATS = {
    "vllm": "vllm",
    "sglang": "sglang",
    "aiperf": "aiperf",
    "guidellm": "guidellm",
    "mad": "mad",
    "nccl-tests": "nccl_tests",
    "rccl-tests": "nccl_tests",
    "trtllm-bench": "trtllm_bench",
}

__all__ = ["FORMATS", "ResultImportError", "Imported", "import_files", "parse"]


def parse(
    paths: list[Path], fmt: str, workload: str = "imported", gpus: int | None = None
) -> Imported:
    """Parse ``paths`` as ``fmt``; raises :class:`ResultImportError` with one clear line."""
    if fmt not in FORMATS:
        raise ResultImportError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt == "pocforge":
        raise ResultImportError("pocforge results are runs already; use them directly")
    for path in paths:
        if not Path(path).is_file():
            raise ResultImportError(f"{path}: no such file")
    module = importlib.import_module(f"pocforge.results.importers.{FORMATS[fmt]}")
    return module.parse([Path(p) for p in paths], workload=workload, gpus=gpus)


def import_files(
    paths: list[Path],
    fmt: str,
    *,
    store: RunStore | None = None,
    as_ref: str | None = None,
    workload: str = "imported",
    gpus: int | None = None,
) -> Run:
    """Parse and write a run; ``as_ref`` is ``POC/RUN`` (default: ``imported/<new id>``)."""
    imported = parse(paths, fmt, workload, gpus)
    store = store or RunStore()
    poc, run_id = "imported", None
    if as_ref:
        poc, _, run_id = as_ref.partition("/")
        run_id = run_id or None
    spec = _spec_or_none(poc)
    run = store.create(spec, poc=poc, run_id=run_id, provenance=False)
    digest = sha256_file(paths[0])[0]
    run.set_imported_from(imported.tool, Path(paths[0]), digest)
    with run.stage("imported") as stage:
        for path in paths:
            stage.add_file(path)
    if imported.serving:
        with run.stage("serving") as stage:
            for result in imported.serving:
                stage.write_json(f"{result.workload}/result.json", result)
                for pid, records in imported.records.get(result.workload, {}).items():
                    stage.append_jsonl(f"{result.workload}/requests-{pid}.jsonl", records)
    if imported.collectives:
        with run.stage("collectives") as stage:
            names: dict[str, int] = {}
            for result in imported.collectives:
                n = names[result.collective] = names.get(result.collective, 0) + 1
                suffix = "" if n == 1 else f"-{n}"
                stage.write_json(f"{result.collective}{suffix}.json", result)
    run.finish()
    return run


def _spec_or_none(poc: str):
    from pocforge.spec import SpecError, load_poc

    try:
        return load_poc(poc)
    except SpecError:
        return None
