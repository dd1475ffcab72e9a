"""The CPU P/D pair with vLLM's production connector, NIXL (optional: runs where ``nixl``
and ``nixl-cu12`` 1.5.1 are installed in ``.venv``, ``--no-deps``; ``make setup`` does not
install them). The kit's router speaks vLLM's proxy protocol: prefill answers one token
with ``kv_transfer_params``, decode pulls the KV over NIXL (CPU buffers, a handshake port
per instance).

Measured here (2026-12-01, 2 cores, under load): every prompt token of decode from the
transfer, 0.459 MB per request, TTFT p50 803 ms against 104 ms with the ExampleConnector:
NIXL's UCX progress thread busy-polls a core, so on 2 cores the pair is slow; nothing here
gates on speed."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from pocforge.bench.from_spec import sweep_config
from pocforge.bench.sweep import run_sweep
from pocforge.runner.local import serve
from pocforge.spec import load_spec

from ..conftest import REPO
from ..servers import needs
from .test_disagg_serving import POC, complete, prompts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.budget(600, "a NIXL prefill/decode pair: UCX busy-polls a core of two"),
]

if importlib.util.find_spec("nixl") is None:
    pytest.skip(
        "nixl is not installed (optional: pip install --no-deps nixl==1.5.1 nixl-cu12==1.5.1)",
        allow_module_level=True,
    )


def test_the_nixl_pair_answers_as_the_aggregated_server(tiny_llama, vllm_server, tmp_path):
    needs("vllm")
    data = yaml.safe_load((REPO / "pocs" / POC / "poc.yaml").read_text())
    data["model"].update(id=str(tiny_llama), served_name="tiny", max_model_len=1024)
    del data["model"]["tiny"]
    data["serving"]["disaggregation"]["connector"] = "NixlConnector"
    data["serving"]["startup_timeout_s"] = 600
    (tmp_path / POC).mkdir()
    (tmp_path / POC / "poc.yaml").write_text(yaml.safe_dump(data))
    spec = load_spec(tmp_path / POC / "poc.yaml")
    aggregated = vllm_server.launch.health_url.rsplit("/", 1)[0]
    (tmp_path / "serving").mkdir()
    with serve(spec, tmp_path / "serving", say=lambda _: None) as (url, _):
        for prompt in prompts(2, seed=4):
            assert complete(url, prompt) == complete(aggregated, prompt)
        (workload,) = spec.serving.workloads
        summary = run_sweep(sweep_config(spec, workload, url, str(tiny_llama)), tmp_path / "chat")
    (point,) = summary.points
    (repeat,) = point.repeats
    assert repeat.failed == 0
    assert repeat.metrics["kv_transfer_share"] > 0.9
    assert repeat.metrics["kv_transfer_mb_per_request"] > 0
    assert repeat.server.delta["vllm:nixl_num_failed_transfers_total"] == 0
