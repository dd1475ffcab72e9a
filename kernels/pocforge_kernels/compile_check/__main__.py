"""``python -m pocforge_kernels.compile_check [--arch A ...] [--op OP ...] [--json OUT]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from .targets import TARGETS

    parser = argparse.ArgumentParser(
        prog="python -m pocforge_kernels.compile_check",
        description="Compile every kernel launch for real GPU targets (no GPU needed).",
    )
    parser.add_argument("--arch", action="append", dest="archs", choices=sorted(TARGETS))
    parser.add_argument("--op", action="append", dest="ops", metavar="OP")
    # fp32 is left out: DeepSeek-V3's expert weights alone would be 30 GB of address space.
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument(
        "--jobs", type=int, metavar="N", help="targets compiled at once (default: one per core)"
    )
    parser.add_argument("--all", action="store_true", help="print every compiled variant")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the result here")
    parser.add_argument("--markdown", action="store_true", help="print the summary as Markdown")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")

    import torch

    from ..bench.report import compile_markdown, print_compile_report
    from .run import compile_all

    try:
        result = compile_all(args.archs, args.ops, getattr(torch, args.dtype), args.jobs)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        print(compile_markdown(result), end="")
    else:
        print_compile_report(result, every_variant=args.all)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
