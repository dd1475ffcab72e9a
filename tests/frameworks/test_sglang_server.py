"""The SGLang adapter starts SGLang's CPU engine (its own environment) on the tiny model:
it serves completions and chat, its /metrics is scraped around a benchmark point as vLLM's
is, it stops its whole process group, and a killed server is reported as a crash with its
log tail.  The server is the session's plain one on the tiny Llama (``sglang_llama`` in
``tests/conftest.py``, also the SGLang plugin test's reference); the test that kills it
runs after its last other user."""

from __future__ import annotations

import json
import os
import signal
import urllib.request

import jsonschema
import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.promscrape import parse_metrics
from pocforge.bench.sweep import run_sweep
from pocforge.frameworks.process import ServerCrashed

from ..servers import base_url

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "the session's SGLang CPU server started"),
]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_serves_completions_and_chat(sglang_llama):
    base = base_url(sglang_llama)
    completion = post(
        f"{base}/v1/completions",
        {"model": "tiny", "prompt": "hello", "max_tokens": 4, "temperature": 0},
    )
    assert completion["usage"]["completion_tokens"] == 4
    chat = post(
        f"{base}/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
    )
    assert (
        chat["choices"][0]["message"]["role"] == "assistant"
        and chat["usage"]["completion_tokens"] == 3
    )
    log = sglang_llama.log_file.read_text()
    assert (
        "SGLANG_USE_CPU_ENGINE=1" in log.splitlines()[0]
        and "--sleep-on-idle" in log.splitlines()[0]
    )


def test_a_benchmark_point_scrapes_sglangs_metrics(sglang_llama, tiny_llama, tmp_path):
    """The plan's ``--enable-metrics`` serves ``sglang:`` samples on /metrics, and a point of
    4 requests (48 prompt tokens, 12 generated each) reads SGLang's own count of exactly
    them under the kit's names, with the gauges the kit polls."""
    assert "--enable-metrics" in sglang_llama.launch.argv
    base = base_url(sglang_llama)
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
        samples = parse_metrics(response.read().decode())
    assert samples["sglang:num_requests_total"] >= 1  # SGLang's own warmup, at least
    cfg = SweepConfig(
        base_url=base,
        model="tiny",
        tokenizer=str(tiny_llama),
        dataset=DatasetConfig(isl="48", osl="12"),
        values=[2],
        num_prompts=4,
        warmup=1,
    )
    rep = run_sweep(cfg, tmp_path).points[0].repeats[0]
    # SGLang's NaN gauges are left out, so the summary holds to its schema (numbers only).
    schema = json.loads((tmp_path / "summary.schema.json").read_text())
    jsonschema.validate(json.loads((tmp_path / "summary.json").read_text()), schema)
    srv = rep.server
    assert rep.completed == 4 and srv.scraped and srv.error is None, srv.error
    assert srv.delta["sglang:prompt_tokens_total"] == 4 * 48
    assert srv.delta["sglang:generation_tokens_total"] == 4 * 12
    counted = [srv.derived[k] for k in ("requests", "prompt_tokens", "generation_tokens")]
    assert counted == [4, 4 * 48, 4 * 12]
    assert 0 < srv.derived["ttft_mean_s"] < srv.derived["e2el_mean_s"]
    assert 0 <= srv.derived["prefix_cache_hit_rate"] <= 1
    assert {"sglang:token_usage", "sglang:num_running_reqs", "sglang:num_queue_reqs"} <= set(
        srv.after
    )


def test_a_profiled_point_leaves_sglangs_trace_and_the_kit_sums_its_table(
    sglang_llama, tiny_llama, tmp_path
):
    """The kit's profile hook around a point (SGLang's ``/start_profile`` with the output
    folder in its body, ``/stop_profile`` after): SGLang's torch profiler writes a trace per
    TP rank and no table; the dashboard's entry for the point sums the table from the trace
    (:mod:`pocforge.report.trace_ops`), whose operations are torch's and the model's."""
    from pocforge.report.profiles import points
    from pocforge.results.serving import load_workload
    from pocforge.runner.profile import ProfileHook

    said: list[str] = []
    folder = tmp_path / "chat"
    hook = ProfileHook(
        base_url(sglang_llama), "sglang", ["c1"], tmp_path / "traces", folder, say=said.append,
        logs=[sglang_llama.log_file],
    )  # fmt: skip
    cfg = SweepConfig(
        base_url=base_url(sglang_llama),
        model="tiny",
        tokenizer=str(tiny_llama),
        dataset=DatasetConfig(isl="16", osl="6"),
        values=[1],
        num_prompts=3,
    )
    summary = run_sweep(cfg, folder, hook=hook)
    assert summary.points[0].status == "ok", said
    traces = sorted((folder / "profile-c1").glob("*.trace.json.gz"))
    assert traces and not list((folder / "profile-c1").glob("*.profiler_out.txt")), said
    (entry,) = points(load_workload(folder), folder, tmp_path)
    tables = {t["name"]: t for t in entry["tables"]}
    assert set(tables) == {t.name for t in traces}
    rows = [r["Name"] for t in tables.values() for r in t["table"].rows]
    assert all(t["summed"] and "error" not in t for t in tables.values())
    assert any(name.startswith("aten::") for name in rows), rows


@pytest.mark.ends_shared_server("sglang_llama")
def test_killed_server_is_reported_as_a_crash_with_its_log(sglang_llama):
    # The server's last log lines are this request's, whatever its earlier users sent.
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    post(f"{base_url(sglang_llama)}/v1/chat/completions", chat)
    os.kill(sglang_llama.pid, signal.SIGKILL)
    sglang_llama.proc.wait(timeout=30)
    with pytest.raises(ServerCrashed) as info:
        sglang_llama.check_alive()
    assert info.value.exit_code == -signal.SIGKILL
    assert (
        "fired up and ready to roll" in info.value.log_tail
        or "/v1/chat/completions" in info.value.log_tail
    )
    sglang_llama.stop()  # ends the scheduler and detokenizer the killed launcher may leave behind
    assert sglang_llama.live_group_members() == []
