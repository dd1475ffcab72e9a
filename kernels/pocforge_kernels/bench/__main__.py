"""``python -m pocforge_kernels.bench [--op OP ...] [--json OUT]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pocforge_kernels.bench", description="Benchmark pocforge's Triton kernels."
    )
    parser.add_argument(
        "--op",
        action="append",
        dest="ops",
        metavar="OP",
        help="an op to run (repeatable; default: all)",
    )
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results here")
    args = parser.parse_args(argv)

    import torch

    from .harness import run_benchmarks
    from .report import print_report

    result = run_benchmarks(args.ops, getattr(torch, args.dtype), args.device)
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(row.get("correct") for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
