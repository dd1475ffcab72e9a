"""``pocforge bench serve`` against the scripted instrument: the fault tests' client runs."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

from pocforge.bench.records import RequestRecord

POCFORGE = str(Path(sys.executable).parent / "pocforge")


def bench_cmd(
    url: str, tokenizer: Path, out: Path, *, prompts: int, concurrency: str, **flags
) -> list[str]:
    cmd = [
        POCFORGE, "bench", "serve", "--base-url", url, "--model", "instrument",
        "--tokenizer", str(tokenizer), "--isl", "8", "--osl", str(flags.pop("osl", 10)),
        "--concurrency", concurrency, "--num-prompts", str(prompts), "--repeats", "1",
        "--quiet", "--out", str(out),
    ]  # fmt: skip
    for flag, value in flags.items():
        cmd += [f"--{flag.replace('_', '-')}", str(value)]
    return cmd


def lag(url: str) -> dict:
    with urllib.request.urlopen(url + "/lag", timeout=10) as answer:
        return json.loads(answer.read())


def reset(url: str) -> None:
    request = urllib.request.Request(url + "/lag/reset", data=b"", method="POST")
    urllib.request.urlopen(request, timeout=10).read()


def records_in(out) -> tuple[list[RequestRecord], int]:
    """Every record on disk, and the lines that do not parse (a torn write)."""
    good, torn = [], 0
    for path in sorted(out.glob("requests-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                good.append(RequestRecord.model_validate_json(line))
            except ValueError:
                torn += 1
    return good, torn
