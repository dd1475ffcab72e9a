"""Everything a run folder holds, read once: what verdicts, comparisons and the report use.

Reading never raises on a damaged or partial folder: a file that cannot be read becomes a
line in ``problems`` and the rest still loads (a run cut off mid-write still reports).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocforge.results.schema import (
    ClusterHealth,
    CollectiveResult,
    KernelResults,
    Provenance,
    SchemaError,
    ServingResult,
    TrainingResult,
    load_document,
)
from pocforge.results.serving import load_workload


@dataclass
class RunData:
    run: Any
    serving: dict[str, tuple[ServingResult, Path | None]] = field(default_factory=dict)
    training: TrainingResult | None = None
    kernels: KernelResults | None = None
    collectives: list[CollectiveResult] = field(default_factory=list)
    cluster: ClusterHealth | None = None
    provenance: Provenance | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, run: Any) -> RunData:
        data = cls(run=run)
        root = Path(run.path)
        serving = root / "serving"
        if serving.is_dir():
            for folder in sorted(p for p in serving.iterdir() if p.is_dir()):
                try:
                    data.serving[folder.name] = (load_workload(folder), folder)
                except SchemaError as exc:
                    data.problems.append(str(exc))
        data.training = data._one(root / "training" / "result.json", TrainingResult)
        data.kernels = data._one(root / "kernels" / "results.json", KernelResults)
        data.cluster = data._one(root / "cluster" / "health.json", ClusterHealth)
        if (root / "provenance.json").exists():
            data.provenance = data._one(root / "provenance.json", Provenance)
        folder = root / "collectives"
        if folder.is_dir():
            for file in sorted(folder.glob("*.json")):
                result = data._one(file, CollectiveResult)
                if result is not None:
                    data.collectives.append(result)
        return data

    def _one(self, path: Path, model: type) -> Any:
        if not path.is_file():
            return None
        try:
            return load_document(path, model)
        except SchemaError as exc:
            self.problems.append(str(exc))
            return None
