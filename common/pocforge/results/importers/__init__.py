"""Importers: other tools' result files -> our schema, in a run folder of their own.

``pocforge import FILE… --format TOOL [--as POC/RUN]`` parses the files with the tool's
module here, keeps the tool's metric definitions and the list of where they differ from
ours (:class:`~pocforge.results.stage_schema.DefinitionDifference`), and writes a run:

- ``serving/<workload>/result.json`` (``ServingResult``) and, where the tool kept
  per-request data, ``serving/<workload>/requests-<point>.jsonl`` in the serving
  benchmark's record format;
- ``collectives/<collective>.json`` (``CollectiveResult``);
- ``collectives/ep_alltoall-<benchmark>.json`` (``EpAllToAllResult``) from DeepEP / MoRI
  dispatch-combine benchmark output (``deepep`` and ``mori`` read either);
- ``training/result.json`` (``TrainingResult``, the kind the kit's own training benchmark
  writes, so the dashboard, verdicts and comparisons read it alike) from a training log;
- ``kernels/results.json`` (``KernelResults``) from ``scripts/gpu-kernels.sh``'s
  ``kernels-bench.json``, with each op's GPU profiler summary from ``profiles/<op>/``;
- ``imported/<original file>``: the input, byte for byte (secrets scrubbed).

A training log does not always say what its numbers need: ``--gpus`` (world size),
``--seq-len`` (tokens/s/GPU from step times), ``--dtype`` and ``--gpu`` (MFU against the
catalog's dense peak) and ``--warmup`` (iterations left out of the rates) say it; they are
refused for the serving and collective formats, except ``--gpu``, which names the GPU type
of a serving result too.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pocforge.atomic import sha256_file
from pocforge.catalog import gpu_names
from pocforge.results.importers.common import Imported, ResultImportError, honest_point
from pocforge.results.importers.training import DTYPES
from pocforge.results.store import Run, RunStore

FORMATS = {
    "vllm": "vllm",
    "sglang": "sglang",
    "aiperf": "aiperf",
    "guidellm": "guidellm",
    "mad": "mad",
    "nccl-tests": "nccl_tests",
    "rccl-tests": "nccl_tests",
    "deepep": "deepep",
    "mori": "deepep",
    "trtllm-bench": "trtllm_bench",
    "mlperf": "mlperf",
    "published": "published",
    "megatron-log": "megatron_log",
    "dgxc": "dgxc",
    "kernels": "kernels",
}
TRAINING_FORMATS = ("megatron-log", "dgxc")

__all__ = [
    "FORMATS",
    "TRAINING_FORMATS",
    "ResultImportError",
    "Imported",
    "import_files",
    "parse",
]


def parse(
    paths: list[Path],
    fmt: str,
    workload: str = "imported",
    gpus: int | None = None,
    *,
    gpu: str | None = None,
    dtype: str | None = None,
    seq_len: int | None = None,
    warmup: int | None = None,
) -> Imported:
    """Parse ``paths`` as ``fmt``; raises :class:`ResultImportError` with one clear line."""
    if fmt not in FORMATS:
        raise ResultImportError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt == "pocforge":
        raise ResultImportError("pocforge results are runs already; use them directly")
    for path in paths:
        if not Path(path).is_file():
            raise ResultImportError(f"{path}: no such file")
    if gpu is not None and gpu not in gpu_names():
        raise ResultImportError(f"unknown GPU type {gpu!r} (known: {', '.join(gpu_names())})")
    if dtype is not None and dtype not in DTYPES:
        raise ResultImportError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    module = importlib.import_module(f"pocforge.results.importers.{FORMATS[fmt]}")
    files = [Path(p) for p in paths]
    for path in files:  # every format is text: binary input is refused before any parser
        _require_text(path, fmt)
    if fmt in TRAINING_FORMATS:
        options = {"gpu": gpu, "dtype": dtype, "seq_len": seq_len, "warmup": warmup}
        return module.parse(files, workload=workload, gpus=gpus, **options)
    refused = [n for n, v in (("dtype", dtype), ("seq-len", seq_len), ("warmup", warmup)) if v]
    if refused:
        raise ResultImportError(
            f"--{', --'.join(refused)}: for training logs ({', '.join(TRAINING_FORMATS)}), "
            f"not {fmt}"
        )
    # one reader serves both collective formats: the format named labels the result
    named = {"tool": fmt} if FORMATS[fmt] == "nccl_tests" else {}
    imported = module.parse(files, workload=workload, gpus=gpus, **named)
    for result in imported.serving:
        result.gpu = result.gpu or gpu
        result.points = [honest_point(point) for point in result.points]
    return imported


def _require_text(path: Path, fmt: str) -> None:
    """``path`` decodes as UTF-8, else one line naming the file, the byte and the format."""
    with Path(path).open("rb") as handle:
        data = handle.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultImportError(
            f"{path}: binary data, not text (not UTF-8 at byte {exc.start}: "
            f"{data[exc.start]:#04x}); a {fmt} result is a text file: pass the tool's own output"
        ) from None


def import_files(
    paths: list[Path],
    fmt: str,
    *,
    store: RunStore | None = None,
    as_ref: str | None = None,
    workload: str = "imported",
    gpus: int | None = None,
    **training: Any,
) -> Run:
    """Parse and write a run; ``as_ref`` is ``POC/RUN`` (default: ``imported/<new id>``);
    ``training`` holds :func:`parse`'s keyword options (gpu, dtype, seq_len, warmup)."""
    imported = parse(paths, fmt, workload, gpus, **training)
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
    if imported.training is not None:
        with run.stage("training") as stage:
            stage.write_json("result.json", imported.training)
    if imported.kernels is not None:
        with run.stage("kernels") as stage:
            stage.write_json("results.json", imported.kernels)
            for rel, source in imported.kernel_files.items():
                stage.add_file(source, rel)
    run.finish()
    return run


def _spec_or_none(poc: str):
    from pocforge.spec import SpecError, load_poc

    try:
        return load_poc(poc)
    except SpecError:
        return None
