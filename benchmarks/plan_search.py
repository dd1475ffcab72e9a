"""Benchmark: the planner's search over every layout of a 64-node, 512-GPU cluster for a
671B MoE model (DeepSeek-V3 on MI300X and on H200; SGLang's layouts, DP-attention
included, are the most numerous) and for its training layouts, as ``pocforge plan`` runs
it. Target: each search under 2 s here.

``python -m benchmarks.plan_search`` prints a table: layouts tried, ranked, rejected, the
best layout and the wall time.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from pocforge.catalog import catalog_entry
from pocforge.plan import (
    Device,
    ServingPoint,
    Shape,
    TrainingPoint,
    search_serving,
    search_training,
)

TARGET_S = 2.0


def _timed(search, *args):
    started = time.perf_counter()
    found = search(*args)
    return found, time.perf_counter() - started


def main() -> int:
    shape = Shape(catalog_entry("deepseek-v3"))
    table = Table("search", "GPU", "layouts", "ranked", "rejected", "best", "seconds", "target")
    searches = []
    for gpu in ("MI300X", "H200"):
        device = Device.of(gpu)
        for framework in ("vllm", "sglang"):
            point = ServingPoint(1024, 1024, 4096)
            args = (shape, device, 512, point, framework, "fp8", "fp8")
            searches.append((f"serving {framework}", gpu, search_serving, args))
        args = (shape, device, 512, TrainingPoint(4096, 2048), "megatron", "fp8")
        searches.append(("training megatron", gpu, search_training, args))
    slow = False
    for name, gpu, search, args in searches:
        found, seconds = _timed(search, *args)
        slow |= seconds > TARGET_S
        table.add_row(
            name,
            gpu,
            str(len(found.ranked) + len(found.rejected)),
            str(len(found.ranked)),
            str(len(found.rejected)),
            found.best.layout.label() if found.best else "—",
            f"{seconds:.3f}",
            "ok" if seconds <= TARGET_S else "SLOW",
        )
    Console(width=160).print(table)
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
