"""Predicted vs measured: the run's ``plan.json`` (written by ``pocforge run`` before any
stage) beside what the stages measured, point by point, and the planner's error. Metric
labels are marked with ``N_`` (extracted, translated when the rows are built)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocforge.report.i18n import gettext_for
from pocforge.results.run_reader import RunData
from pocforge.results.serving import throughput_per_gpu


def N_(message: str) -> str:
    """Mark a message for extraction; it is translated where it is shown."""
    return message


# (label, the prediction's key, how to read the measured value of a serving point)
SERVING_METRICS = (
    (N_("output tok/s/GPU"), "output_tput_per_gpu", None),
    (N_("TTFT p50 ms"), "ttft_ms", ("ttft_ms", "p50")),
    (N_("TPOT p50 ms"), "tpot_ms", ("tpot_ms", "p50")),
)
TRAINING_METRICS = (
    (N_("tokens/s/GPU"), "tokens_per_s_per_gpu"),
    (N_("TFLOP/s/GPU"), "tflops_per_gpu"),
    (N_("MFU"), "mfu"),
)
ENGLISH = gettext_for("en")
# the throughput metrics of the median absolute error
THROUGHPUT_KEYS = ("output_tput_per_gpu", "tokens_per_s_per_gpu")


def read_plan(run_path: Path) -> dict | None:
    """The run's plan, or None when it has none (a run from before the planner, an import)
    or it cannot be read (the dashboard says so in its caveats)."""
    path = Path(run_path) / "plan.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured in (None, 0):
        return None
    return predicted / measured - 1


def compare(
    plan: dict,
    data: RunData,
    gpus_of: dict[str, int | None],
    _: Callable[[str], str] = ENGLISH,
) -> dict[str, Any]:
    """Rows of predicted vs measured (their text in the language of ``_``) and the median
    absolute throughput error."""
    rows: list[dict[str, Any]] = []
    planned = {w["name"]: w for w in (plan.get("serving") or {}).get("workloads", [])}
    for workload, (result, _folder) in data.serving.items():
        mine = planned.get(workload)
        if mine is None:
            continue
        by_concurrency = {p["concurrency"]: p for p in mine["points"]}
        for point in result.points:
            if point.mode != "concurrency" or point.value is None:
                continue
            predicted = by_concurrency.get(int(point.value))
            if predicted is None:
                continue
            for label, key, where in SERVING_METRICS:
                if where is None:
                    measured = throughput_per_gpu(point, gpus_of.get(workload))
                else:
                    measured = point.metrics.get(where[0], {}).get(where[1])
                rows.append(
                    {
                        "what": f"{workload} {point.id}",
                        "metric": _(label),
                        "key": key,
                        "predicted": predicted.get(key),
                        "measured": measured,
                        "error": _error(predicted.get(key), measured),
                    }
                )
    training = plan.get("training")
    if training is not None and data.training is not None:
        for label, key in TRAINING_METRICS:
            measured = getattr(data.training, key, None)
            predicted = training["prediction"].get(key)
            rows.append(
                {
                    "what": _("training {layout}").format(layout=training["prediction"]["layout"]),
                    "metric": _(label),
                    "key": key,
                    "predicted": predicted,
                    "measured": measured,
                    "error": _error(predicted, measured),
                }
            )
    throughput = [
        abs(r["error"]) for r in rows if r["error"] is not None and r["key"] in THROUGHPUT_KEYS
    ]
    return {
        "rows": rows,
        "median_abs_error": statistics.median(throughput) if throughput else None,
        "gpu": plan.get("gpu"),
        "calibration": plan.get("calibration"),
    }
