"""The kit's kernel benchmark from a GPU node -> a run's ``kernels/`` stage.

``scripts/gpu-kernels.sh`` writes ``kernels-bench.json`` (``python -m pocforge_kernels.bench
--json``, every op merged) and, run with ``PROFILER=nsys|rocprofv3``, each op's kernel
summary in ``profiles/<op>/`` beside it. The import keeps the rows as the kit's own kernels
stage does (:func:`pocforge.results.adapters.from_kernel_bench`) and those summaries as
``kernels/profiles/<op>/<file>``, which the dashboard reads (the GPU kernels by time).
"""

from __future__ import annotations

from pathlib import Path

from pocforge.frameworks.profilers import is_kernel_summary
from pocforge.results.adapters import from_kernel_bench
from pocforge.results.importers.common import Imported, ResultImportError, read_json

PROFILES = "profiles"  # beside the JSON, one folder per op (scripts/gpu-kernels.sh)
FIX = "pass the kernels-bench.json that scripts/gpu-kernels.sh wrote"


def parse(paths: list[Path], workload: str = "imported", gpus: int | None = None) -> Imported:
    if len(paths) != 1:
        raise ResultImportError(f"kernels: one kernels-bench.json at a time, not {len(paths)}")
    (path,) = paths
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise ResultImportError(f"{path}: not a kernel benchmark's document; {FIX}")
    missing = [key for key in ("metadata", "rows", "timed") if key not in doc]
    if missing:
        raise ResultImportError(f"{path}: no {', '.join(missing)}: not a kernel benchmark's; {FIX}")
    try:
        results = from_kernel_bench(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultImportError(f"{path}: a row that does not read ({exc!r}); {FIX}") from None
    ops = {row.op for row in results.rows}
    files: dict[str, Path] = {}
    folder = path.parent / PROFILES
    for op_dir in sorted(folder.iterdir()) if folder.is_dir() else []:
        if op_dir.name not in ops:
            continue
        for summary in sorted(op_dir.iterdir()):
            if summary.is_file() and is_kernel_summary(summary):
                files[f"{PROFILES}/{op_dir.name}/{summary.name}"] = summary
    if doc.get("profiler") and not files:
        raise ResultImportError(
            f"{path}: ran under {doc['profiler']} but {folder} holds no kernel summary of "
            f"its ops; copy the folder with it (scripts/gpu-kernels.sh writes both)"
        )
    return Imported(tool="pocforge-kernels", kernels=results, kernel_files=files)
