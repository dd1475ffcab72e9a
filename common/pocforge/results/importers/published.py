"""Published results: numbers a vendor or a benchmark site printed (a performance page, an
InferenceX row, a blog table), transcribed into a small YAML file with where and when they
were read, so a POC can set them beside its own measurements — always labelled "published,
not measured here".

The file (safe YAML, its keys checked)::

    publisher: NVIDIA
    title: TensorRT-LLM performance overview, Llama 3.3 70B
    source: https://github.com/NVIDIA/TensorRT-LLM/blob/<commit>/docs/source/performance/perf-overview.md
    seen: 2026-12-01
    software: TensorRT-LLM 1.0, PyTorch backend
    model: nvidia/Llama-3.3-70B-Instruct-FP8
    quantization: fp8
    gpu: H200
    gpus: 1
    scenario: offline maximum throughput (every request queued at once)
    dataset: {isl: 1000, osl: 1000}
    points:
      - {id: offline, output_throughput: 2909}

A point gives ``output_throughput`` (tokens/s for all its GPUs) or
``output_throughput_per_gpu``, and, where the source has them, ``concurrency``,
``interactivity`` (tokens/s/user) or ``tpot_ms``, ``ttft_ms`` and ``e2el_ms`` (medians).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pocforge.results.importers.common import Imported, ResultImportError, sort_points
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "published"
LABEL = "published, not measured here"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PublishedDataset(_Strict):
    name: str | None = None
    isl: int | None = Field(None, ge=1)
    osl: int | None = Field(None, ge=1)


class PublishedPoint(_Strict):
    id: str = Field(min_length=1)
    concurrency: int | None = Field(None, ge=1)
    output_throughput: float | None = Field(None, gt=0)
    output_throughput_per_gpu: float | None = Field(None, gt=0)
    interactivity: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    ttft_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_throughput(self) -> PublishedPoint:
        if self.output_throughput is None and self.output_throughput_per_gpu is None:
            raise ValueError("give output_throughput or output_throughput_per_gpu")
        return self


class PublishedFile(_Strict):
    publisher: str = Field(min_length=1)
    title: str = Field(min_length=1)
    source: str = Field(pattern=r"^https?://", description="Where the numbers were read.")
    seen: dt.date = Field(description="When they were read.")
    software: str = Field(min_length=1)
    model: str = Field(min_length=1)
    quantization: str | None = None
    gpu: str = Field(min_length=1)
    gpus: int = Field(ge=1)
    scenario: str = Field(min_length=1)
    dataset: PublishedDataset = Field(default_factory=PublishedDataset)
    points: list[PublishedPoint] = Field(min_length=1)


def read(path: Path) -> PublishedFile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ResultImportError(f"{path}: not text (a published result is YAML)") from None
    except OSError as exc:
        raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ResultImportError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict):
        raise ResultImportError(
            f"{path}: a published result is a mapping (publisher, source, points…)"
        )
    try:
        return PublishedFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise ResultImportError(f"{path}: {where}: {first['msg']}") from None


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    results = []
    for path in paths:
        doc = read(path)
        count = gpus or doc.gpus
        result = ServingResult(
            workload=workload,
            tool=TOOL,
            source_file=path.name,
            model=doc.model,
            gpus=count,
            definitions={"output_throughput": f"as {doc.publisher} reports it: {doc.scenario}"},
            differences=[
                DefinitionDifference(
                    metric="*",
                    theirs=f"{doc.publisher}'s numbers ({doc.title}, {doc.software}), read {doc.seen}",
                    ours="measured by the kit on the POC's deployment",
                    effect=f"{LABEL}: no records, no intervals; its method is the publisher's",
                )
            ],
            notes=[
                f"{LABEL}: {doc.publisher}, {doc.title} ({doc.source}, read {doc.seen}); "
                f"{doc.software}; {doc.model}"
                + (f" ({doc.quantization})" if doc.quantization else "")
                + f" on {doc.gpus} × {doc.gpu}; {doc.scenario}"
                + (
                    f"; ISL {doc.dataset.isl} / OSL {doc.dataset.osl}"
                    if doc.dataset.isl and doc.dataset.osl
                    else ""
                )
            ],
        )
        for point in doc.points:
            total = point.output_throughput or point.output_throughput_per_gpu * count  # type: ignore[operator]
            metrics: dict[str, dict[str, float | None]] = {
                "output_throughput": {"value": total},
                "output_throughput_per_gpu": {"value": total / count},
            }
            for name in ("tpot_ms", "ttft_ms", "e2el_ms"):
                if getattr(point, name) is not None:
                    metrics[name] = {"median": getattr(point, name)}
            interactivity = point.interactivity or (
                1000.0 / point.tpot_ms if point.tpot_ms else None
            )
            if interactivity:
                metrics["interactivity"] = {"median": interactivity}
            result.points.append(
                ServingPoint(
                    id=point.id,
                    mode="concurrency" if point.concurrency else "unknown",
                    value=point.concurrency,
                    metrics=metrics,
                    caveats=[LABEL],
                )
            )
        result.points = sort_points(result.points)
        results.append(result)
    return Imported(tool=TOOL, serving=results)
