"""The planner against the world: every published point of ``docs/planner-points.yaml``
replayed through the same functions ``pocforge plan predict`` calls, the error of each,
and the median and worst over the points no calibration number was fitted to.

``python -m pocforge.plan.accuracy --write docs/planner-accuracy.md`` (``make
planner-accuracy``) regenerates the page; a test keeps it in sync with the code.
``--fit`` prints, for each calibrated number, the value that fits its calibration points
best (a grid search), for updating ``calibration.yaml`` by hand.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from pocforge.catalog import catalog_entry
from pocforge.plan.hardware import Device, calibration
from pocforge.plan.layout import Layout
from pocforge.plan.serving import Serving, ServingPoint
from pocforge.plan.shape import Shape
from pocforge.plan.training import Training, TrainingPoint

# the frameworks whose training layouts are Megatron's (NeMo and Megatron-Bridge run it;
# torchtitan's FSDP2 is ZeRO-3-like sharding with the same model FLOPs)
_MEGATRON = {"megatron", "nemo", "torchtitan"}
OFFLINE = 1_000_000  # an offline run: as many requests as the engine takes


@dataclass
class Replay:
    id: str
    kind: str
    gpu: str
    model: str
    metric: str
    measured: float
    predicted: float | None
    calibrates: str | None
    skipped: str | None = None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return self.predicted / self.measured - 1


def points_file() -> Path:
    from pocforge.paths import workspace_root

    return workspace_root() / "docs" / "planner-points.yaml"


def load_points(path: Path | None = None) -> list[dict]:
    return yaml.safe_load((path or points_file()).read_text())["points"]


def calibrated_on() -> dict[str, str]:
    """point id -> the calibration number it was fitted to."""
    out = {}
    for knob, ids in (calibration().get("calibrated_on") or {}).items():
        for one in ids:
            out[one] = knob
    return out


def replay(point: dict) -> Replay:
    measured = point["measured"]
    shape = Shape(catalog_entry(point["model"]))
    device = Device.of(point["gpu"])
    fitted = calibrated_on().get(point["id"])
    if point["kind"] == "training":
        framework = "megatron" if point["framework"] in _MEGATRON else "deepspeed"
        zero = point.get("zero") if point.get("zero") is not None else 1
        layout = Layout(
            tp=point["tp"],
            pp=point["pp"],
            dp=point["dp"],
            ep=point.get("ep") or 1,
            cp=point.get("cp") or 1,
            zero=zero,
            micro_batch=point.get("micro_batch") or 1,
            recompute=point.get("recompute") or "none",  # as the source states it
        )
        model = Training(shape, layout, device, framework, point["precision"])
        got = model.predict(TrainingPoint(point["seq_len"], point["global_batch"]))
        metric = "tokens_per_s_per_gpu"
        return Replay(
            point["id"],
            "training",
            point["gpu"],
            point["model"],
            metric,
            measured[metric],
            got.tokens_per_s_per_gpu,
            fitted,
        )
    metric = "output_tput_per_gpu"
    base = Replay(
        point["id"], "serving", point["gpu"], point["model"], metric, measured[metric], None, fitted
    )
    if not point.get("isl"):
        base.skipped = "the source states no input length"
        return base
    framework = point["framework"] if point["framework"] in ("vllm", "sglang", "trtllm") else "vllm"
    layout = Layout(
        tp=point["tp"], pp=point.get("pp") or 1, dp=point.get("dp") or 1, ep=point.get("ep") or 1
    )
    precision = point["precision"]
    kv = "fp8" if precision in ("fp8", "fp4") else "bf16"
    model = Serving(
        shape, layout, device, framework, precision, kv, max_batch=point.get("max_batch")
    )
    replicas = max(1, point["gpus"] // layout.gpus)
    concurrency = point.get("concurrency") or OFFLINE
    got = model.predict(ServingPoint(point["isl"], point["osl"], max(1, concurrency // replicas)))
    base.predicted = got.output_tput_per_gpu
    return base


def summary(replays: list[Replay]) -> dict:
    held_out = [abs(r.error) for r in replays if r.error is not None and r.calibrates is None]
    fitted = [abs(r.error) for r in replays if r.error is not None and r.calibrates]
    return {
        "points": len(replays),
        "held_out": len(held_out),
        "median_abs_error": statistics.median(held_out) if held_out else None,
        "worst_abs_error": max(held_out) if held_out else None,
        "calibration_points": len(fitted),
    }


def markdown(replays: list[Replay]) -> str:
    s = summary(replays)
    lines = [
        "# Planner accuracy against published measurements",
        "",
        "Generated by `make planner-accuracy` (`python -m pocforge.plan.accuracy --write "
        "docs/planner-accuracy.md`) from `docs/planner-points.yaml` (each point's source, quote and "
        "setup are there) and the planner's calibration (`common/pocforge/plan/calibration.yaml`); "
        "a test fails when this page and the code disagree. Throughput per GPU: output tokens/s "
        "for serving, tokens/s for training.",
        "",
        f"**Held-out points (no calibration number was fitted to them): {s['held_out']}; median "
        f"absolute error {_pct(s['median_abs_error'])}, worst {_pct(s['worst_abs_error'])}.** "
        f"{s['calibration_points']} points calibrated a number (marked below) and are not counted.",
        "",
        "| point | kind | GPU | model | measured | predicted | error | calibrates |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for r in replays:
        predicted = "–" if r.predicted is None else f"{r.predicted:,.0f}"
        error = r.skipped or ("–" if r.error is None else f"{r.error:+.0%}")
        lines.append(
            f"| {r.id} | {r.kind} | {r.gpu} | {r.model} | {r.measured:,.0f} | {predicted} | "
            f"{error} | {r.calibrates or ''} |"
        )
    lines += [
        "",
        "Replay conventions: a serving point without a concurrency is an offline run (the engine "
        "batches as many requests as its KV cache and batch limit take); its KV cache is fp8 "
        "when the weights are fp8 or fp4; NeMo, Megatron-Bridge and torchtitan layouts run as "
        "Megatron's (distributed optimizer); a training point recomputes activations only where "
        "its source says so (`recompute`); MFU and TFLOP/s count model FLOPs as Megatron does.",
        "",
    ]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


# --------------------------------------------------------------------------- fitting
GRID = {
    "serving.decode_efficiency": [x / 20 for x in range(4, 21)],
    "serving.kv_read_efficiency": [x / 20 for x in range(2, 21)],
    "serving.moe_efficiency": [x / 20 for x in range(2, 21)],
    "training.elementwise_passes": [float(x) for x in range(100, 601, 20)],
    "training.moe_efficiency": [x / 40 for x in range(1, 41)],
}


@contextmanager
def _knob(name: str, value: float):
    section, key = name.split(".")
    table = calibration()[section]
    old = table[key]
    table[key] = value
    try:
        yield
    finally:
        table[key] = old


def fit(points: list[dict]) -> dict[str, float]:
    """Each calibrated number's best value on its own points (mean absolute log error)."""
    import math

    best: dict[str, float] = {}
    by_knob: dict[str, list[dict]] = {}
    for p in points:
        if (knob := calibrated_on().get(p["id"])) is not None:
            by_knob.setdefault(knob, []).append(p)
    for knob, mine in by_knob.items():
        scores = []
        for value in GRID[knob]:
            with _knob(knob, value):
                errs = [
                    abs(math.log(r.predicted / r.measured))
                    for r in map(replay, mine)
                    if r.predicted
                ]
            scores.append((sum(errs) / max(len(errs), 1), value))
        best[knob] = min(scores)[1]
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="Write the markdown page here.")
    parser.add_argument("--fit", action="store_true", help="Print the best-fit calibration.")
    args = parser.parse_args(argv)
    points = load_points()
    if args.fit:
        for knob, value in fit(points).items():
            print(f"{knob}: {value}")
        return 0
    page = markdown([replay(p) for p in points])
    if args.write:
        args.write.write_text(page)
        print(f"wrote {args.write}")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
