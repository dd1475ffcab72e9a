"""Everything a run folder holds, read once: what verdicts, comparisons and the report use.

Reading never raises on a damaged or partial folder: a file that cannot be read becomes a
line in ``problems`` and the rest still loads (a run cut off mid-write still reports).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocforge.quality.accuracy import AccuracyResult
from pocforge.quality.parity import ParityResult
from pocforge.quality.sanity import SanityResult
from pocforge.results.base import SchemaError
from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.run_schema import Provenance
from pocforge.results.schema import load_document
from pocforge.results.serving import load_workload
from pocforge.results.stage_schema import (
    ClusterHealth,
    CollectiveResult,
    KernelResults,
    ServingResult,
    TrainingResult,
)


@dataclass
class RunData:
    run: Any
    serving: dict[str, tuple[ServingResult, Path | None]] = field(default_factory=dict)
    training: TrainingResult | None = None
    kernels: KernelResults | None = None
    collectives: list[CollectiveResult] = field(default_factory=list)
    # collectives/ep_alltoall-*.json: DeepEP / MoRI dispatch-combine outputs
    ep_alltoall: list[EpAllToAllResult] = field(default_factory=list)
    cluster: ClusterHealth | None = None
    provenance: Provenance | None = None
    sanity: SanityResult | None = None
    # accuracy task name -> its result, or the infrastructure failure that stopped it
    accuracy: dict[str, AccuracyResult | str] = field(default_factory=dict)
    parity: ParityResult | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, run: Any) -> RunData:
        data = cls(run=run)
        root = Path(run.path)
        serving = root / "serving"
        if serving.is_dir():
            # "_accuracy", "_parity": the serving stage's gates, never a workload
            for folder in sorted(p for p in serving.iterdir() if p.is_dir() and p.name[0] != "_"):
                try:
                    data.serving[folder.name] = (load_workload(folder), folder)
                except SchemaError as exc:
                    data.problems.append(str(exc))
        data.training = data._one(root / "training" / "result.json", TrainingResult)
        data.kernels = data._one(root / "kernels" / "results.json", KernelResults)
        data.cluster = data._one(root / "cluster" / "health.json", ClusterHealth)
        if (root / "provenance.json").exists():
            data.provenance = data._one(root / "provenance.json", Provenance)
        data._gates(root)
        folder = root / "collectives"
        if folder.is_dir():
            for file in sorted(folder.glob("*.json")):
                if file.name.startswith("ep_alltoall-"):
                    found = data._one(file, EpAllToAllResult)
                    if found is not None:
                        data.ep_alltoall.append(found)
                    continue
                result = data._one(file, CollectiveResult)
                if result is not None:
                    data.collectives.append(result)
        return data

    def _gates(self, root: Path) -> None:
        self.sanity = self._pydantic(root / "serving" / "sanity.json", SanityResult)
        self.parity = self._pydantic(root / "parity" / "result.json", ParityResult)
        tasks = root / "serving" / "_accuracy"
        for folder in sorted(tasks.iterdir()) if tasks.is_dir() else []:
            if (folder / "result.json").is_file():
                found = self._pydantic(folder / "result.json", AccuracyResult)
                if found is not None:
                    self.accuracy[folder.name] = found
            elif (folder / "error.json").is_file():
                try:
                    self.accuracy[folder.name] = json.loads((folder / "error.json").read_text())[
                        "error"
                    ]
                except (OSError, ValueError, KeyError) as exc:
                    self.problems.append(f"{folder / 'error.json'}: {exc}")

    def _pydantic(self, path: Path, model: type) -> Any:
        """A gate's own document (its stage's schema, ``pocforge.quality``)."""
        if not path.is_file():
            return None
        try:
            return model.model_validate_json(path.read_text())
        except (OSError, ValueError) as exc:
            self.problems.append(f"{path}: {' '.join(str(exc).split())[:300]}")
            return None

    def _one(self, path: Path, model: type) -> Any:
        if not path.is_file():
            return None
        try:
            return load_document(path, model)
        except SchemaError as exc:
            self.problems.append(str(exc))
            return None
