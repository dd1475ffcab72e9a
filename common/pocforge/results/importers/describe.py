"""What an import would become, in words (``pocforge import --check``): per result its
tool and version, its points, runs or steps, and every note and caveat the importer wrote,
so a file can be judged before any run is written."""

from __future__ import annotations

from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.importers.common import Imported
from pocforge.results.stage_schema import (
    CollectiveResult,
    ServingPoint,
    ServingResult,
    TrainingResult,
)


def _tool(tool: str, version: str | None) -> str:
    return f"{tool} {version}" if version else f"{tool} (version not printed)"


def _point(point: ServingPoint) -> str:
    """``c4 ok (60 ok, 0 failed)``; a count the file does not record is left out."""
    if point.requests is None:
        return f"{point.id} {point.status}"
    failed = "" if point.failed is None else f", {point.failed} failed"
    return f"{point.id} {point.status} ({point.requests} ok{failed})"


def _serving(result: ServingResult) -> list[str]:
    points = ", ".join(_point(p) for p in result.points)
    lines = [f"serving, {_tool(result.tool, result.tool_version)}: {points or 'no points'}"]
    lines += [f"  caveat {p.id}: {caveat}" for p in result.points for caveat in p.caveats]
    return lines + [f"  note: {note}" for note in result.notes]


def _collective(result: CollectiveResult | EpAllToAllResult) -> list[str]:
    if isinstance(result, EpAllToAllResult):
        return [f"collective, {result.tool}: {result.collective}"]
    average = "no average" if result.avg_busbw_gbs is None else f"avg {result.avg_busbw_gbs:g}"
    lines = [
        f"collective, {_tool(result.tool, result.tool_version)}: {result.collective} over "
        f"{result.ranks} ranks on {result.nodes} node(s), {len(result.rows)} sizes, "
        f"{average} GB/s"
    ]
    return lines + [f"  note: {note}" for note in result.notes]


def _training(result: TrainingResult) -> list[str]:
    rates = [
        f"{name} {value:.4g}"
        for name, value in (
            ("tokens/s/GPU", result.tokens_per_s_per_gpu),
            ("TFLOP/s/GPU", result.tflops_per_gpu),
            ("MFU", result.mfu),
        )
        if value is not None
    ]
    lines = [
        f"training, {_tool(result.tool, result.tool_version)}: {len(result.steps)} logged "
        f"steps, {', '.join(rates) or 'no rates'}"
    ]
    return lines + [f"  note: {note}" for note in result.notes]


def describe(imported: Imported) -> list[str]:
    """One line per result, then its caveats and notes (indented)."""
    lines: list[str] = []
    for serving in imported.serving:
        lines += _serving(serving)
    for collective in imported.collectives:
        lines += _collective(collective)
    if imported.training is not None:
        lines += _training(imported.training)
    if imported.kernels is not None:
        lines.append(f"kernels: {len(imported.kernels.rows)} rows on {imported.kernels.gpu}")
    return lines
