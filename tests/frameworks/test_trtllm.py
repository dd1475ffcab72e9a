"""The TensorRT-LLM adapter: the spec becomes one ``trtllm-serve`` launch with TensorRT-LLM's
own flag names and an ``--extra_llm_api_options`` YAML file, and every spec TensorRT-LLM
would refuse (or the kit cannot launch) is refused by ``validate`` with the field and the fix.
TensorRT-LLM itself is not installable here: its own parser runs only in the stand-in test
at the end, which proves the check script's plumbing, not TensorRT-LLM's verdicts."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.argcheck import SCRIPTS
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.frameworks.trtllm import serve_flags
from pocforge.plan.search import serving_layouts
from pocforge.runtimes import plan_nodes, resolve
from pocforge.spec import SpecError, load_spec
from pocforge.spec.planning import serving_model, shape_of
from pocforge.spec.trtllm_options import LLM_API_KEYS, OPTIONS_FILE, SERVE_FLAGS

from ..conftest import REPO

NAME = "llama-3.1-70b-fp8-h200-trtllm"
POC = yaml.safe_load((REPO / "pocs" / NAME / "poc.yaml").read_text())
MOE = {"layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128, "experts": 256, "top_k": 8}
CTX = LaunchContext(repo=REPO, python="python3")


def data() -> dict:
    spec = copy.deepcopy(POC)
    spec["model"].pop("hf_token")  # no ${HF_TOKEN} needed to plan
    return spec


def write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / spec["poc"]["name"] / "poc.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def launch_of(tmp_path: Path, spec: dict):
    (launch,) = ADAPTERS["trtllm"].plan(load_spec(write(tmp_path, spec)), CTX)
    return launch


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def problems(tmp_path: Path, spec: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, spec))
    return [str(p) for p in info.value.problems]


# the launch ---------------------------------------------------------------------------------


def test_the_poc_is_one_trtllm_serve_with_its_layout_and_limits():
    (launch,) = ADAPTERS["trtllm"].plan(load_spec(REPO / "pocs" / NAME / "poc.yaml"), CTX)
    argv = launch.argv
    assert argv[:2] == ["trtllm-serve", "/opt/pocforge/models/llama-3.1-70b-instruct-fp8"]
    assert value(argv, "--backend") == "pytorch" and value(argv, "--tp_size") == "8"
    assert value(argv, "--pp_size") == "1" and "--ep_size" not in argv  # dense: no MoE split
    assert value(argv, "--host") == "0.0.0.0" and value(argv, "--port") == "8000"
    assert value(argv, "--max_batch_size") == "256" and value(argv, "--max_num_tokens") == "16384"
    assert value(argv, "--max_seq_len") == "40960"
    assert value(argv, "--kv_cache_free_gpu_memory_fraction") == "0.85"
    assert argv[-2:] == ["--extra_llm_api_options", OPTIONS_FILE]
    assert launch.check_args == argv[1:]  # what TensorRT-LLM's own parser is given
    assert (launch.role, launch.node_rank) == ("server", 0)
    assert launch.health_url == "http://h200-01.poc.example.com:8000/health"
    # every flag is one trtllm-serve has (tensorrt_llm/commands/serve.py)
    assert {part[2:] for part in argv if part.startswith("--")} <= SERVE_FLAGS


def test_the_options_file_holds_the_derived_keys_with_the_pocs_merged_over_them():
    (launch,) = ADAPTERS["trtllm"].plan(load_spec(REPO / "pocs" / NAME / "poc.yaml"), CTX)
    options = yaml.safe_load(launch.files[OPTIONS_FILE])
    assert options == {
        "dtype": "bfloat16",  # model.dtype
        # model.kv_cache_dtype fp8, with the POC's enable_block_reuse beside it
        "kv_cache_config": {"dtype": "fp8", "enable_block_reuse": True},
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": 256},
    }
    assert set(options) <= LLM_API_KEYS


def test_attention_dp_and_expert_parallel_come_from_the_parallel_layout(tmp_path):
    spec = data()
    spec["model"]["facts"] = MOE  # an MoE model the catalog does not know: these facts alone
    spec["model"]["id"] = "acme/moe-under-test-FP8"
    spec["model"]["max_model_len"] = 8192
    spec["serving"]["parallelism"] = {"tp": 8, "dp": 8, "ep": 8, "dp_attention": True}
    launch = launch_of(tmp_path, spec)
    assert value(launch.argv, "--tp_size") == "8" and value(launch.argv, "--ep_size") == "8"
    assert yaml.safe_load(launch.files[OPTIONS_FILE])["enable_attention_dp"] is True

    spec["serving"]["parallelism"] = {"tp": 8}  # a MoE model at ep 1: its split is named too
    launch = launch_of(tmp_path, spec)
    assert value(launch.argv, "--ep_size") == "1"
    assert "enable_attention_dp" not in yaml.safe_load(launch.files[OPTIONS_FILE])


def test_engine_args_pass_through_under_trtllm_serves_own_names(tmp_path):
    spec = data()
    spec["serving"]["engine_args"] = {
        "num_postprocess_workers": 4,
        "trust_remote_code": True,
        "enable_chunked_prefill": False,
    }
    argv = launch_of(tmp_path, spec).argv
    assert value(argv, "--num_postprocess_workers") == "4" and "--trust_remote_code" in argv
    assert not any("chunked" in part for part in argv)  # False: the click flag's default
    assert serve_flags({"custom_module_dirs": ["/a", "/b"]}) == [
        "--custom_module_dirs", "/a", "--custom_module_dirs", "/b",
    ]  # fmt: skip


def test_the_container_is_nvidias_trtllm_image_with_its_ulimits():
    spec = load_spec(REPO / "pocs" / NAME / "poc.yaml")
    runtime = resolve(spec, "serving")
    assert (runtime.kind, runtime.image) == (
        "container",
        "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14",
    )
    (launch,) = plan_nodes(spec, CTX)
    argv = launch.argv
    assert argv[:3] == ["docker", "run", "--rm"] and value(argv, "--gpus") == "all"
    assert "memlock=-1" in argv and "stack=67108864" in argv
    assert launch.runtime["inner_argv"][0] == "trtllm-serve"
    # the options file is written to the launch's working directory, which the container runs in
    assert f"{value(argv, '--workdir')}:{value(argv, '--workdir')}" in argv


def test_the_planner_sizes_the_server_with_trtllms_limits():
    spec = load_spec(REPO / "pocs" / NAME / "poc.yaml")
    model = serving_model(spec, shape_of(spec))
    assert (model.max_batch, model.max_batched_tokens) == (256, 16384)


def test_the_planner_offers_trtllm_replicas_not_data_parallel_copies():
    spec = load_spec(REPO / "pocs" / NAME / "poc.yaml")
    layouts = list(serving_layouts(shape_of(spec), 8, "trtllm"))
    assert layouts and all(layout.dp == 1 for layout in layouts)


def test_the_competitor_poc_runs_the_mi300x_pocs_workloads_and_criteria():
    ours = load_spec(REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
    theirs = load_spec(REPO / "pocs" / NAME / "poc.yaml")
    assert [w.model_dump() for w in theirs.serving.workloads] == [
        w.model_dump() for w in ours.serving.workloads
    ]
    assert [str(c) for c in theirs.acceptance.criteria] == [
        str(c) for c in ours.acceptance.criteria
    ]
    assert theirs.model.max_model_len == ours.model.max_model_len


# the rules ----------------------------------------------------------------------------------


def _gpu(spec, name):
    spec["cluster"]["gpu"] = name


def _nodes(spec, n):
    spec["cluster"].update(nodes=n, hosts=[{"name": f"h{i}", "address": f"h{i}"} for i in range(n)])
    spec["serving"]["parallelism"] = {"tp": 8, "dp": n}


def _moe(spec, **par):
    spec["model"]["facts"] = MOE  # an MoE model the catalog does not know: these facts alone
    spec["model"]["id"] = "acme/moe-under-test-FP8"
    spec["model"]["max_model_len"] = 8192
    spec["serving"]["parallelism"] = par


def _options(spec, **options):
    spec["serving"]["trtllm"]["llm_api_options"].update(options)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: _gpu(s, "MI300X"),
            "cluster.gpu: serving.framework trtllm (TensorRT-LLM) runs on NVIDIA GPUs only and "
            "cluster.gpu is MI300X (AMD); set cluster.gpu to an NVIDIA GPU of the catalog "
            "(H100, H200, B200), or serve with vllm or sglang",
        ),
        (
            lambda s: s.update(cluster={"gpu": "cpu", "gpus_per_node": 8}),
            "cluster.gpu is cpu (no GPU); set cluster.gpu to an NVIDIA GPU of the catalog",
        ),
        (
            lambda s: _nodes(s, 2),
            "cluster.nodes: the kit serves trtllm on one node and cluster.nodes is 2",
        ),
        (
            lambda s: s["serving"].update(parallelism={"tp": 4, "dp": 2}),
            "serving.parallelism.dp: dp = 2: one trtllm-serve holds one copy of the model; use "
            "serving.replicas",
        ),
        (
            lambda s: _moe(s, tp=8, dp=4, ep=8, dp_attention=True),
            "with dp_attention, dp must equal tp (8), not 4",
        ),
        (
            lambda s: _moe(s, tp=8, ep=3),
            "serving.parallelism.ep: ep = 3 does not divide tp = 8",
        ),
        (
            lambda s: s["model"].update(served_name="llama"),
            "model.served_name: trtllm-serve has no --served_model_name",
        ),
        (
            lambda s: s["model"].update(kv_cache_dtype="fp8_e5m2"),
            "model.kv_cache_dtype: TensorRT-LLM has no fp8_e5m2 KV cache",
        ),
        (
            lambda s: s["model"].update(quantization="awq"),
            "model.quantization: trtllm has no --quantization for awq",
        ),
        (
            lambda s: s["serving"].update(engine_args={"tp_size": 4}),
            "serving.engine_args.tp_size: --tp_size is written by the kit from "
            "serving.parallelism.tp; set that instead",
        ),
        (
            lambda s: s["serving"].update(engine_args={"num-postprocess-workers": 4}),
            "--num-postprocess-workers is not a trtllm-serve flag; trtllm-serve's flags use "
            "underscores: num_postprocess_workers",
        ),
        (
            lambda s: s["serving"].update(engine_args={"max-num-seqs": 256}),
            "--max-num-seqs is not a trtllm-serve flag",
        ),
        (
            lambda s: _options(s, enable_attenton_dp=True),
            "serving.trtllm.llm_api_options.enable_attenton_dp: 'enable_attenton_dp' is not an "
            "LLM API option of TensorRT-LLM (TorchLlmArgs refuses unknown keys, so trtllm-serve "
            "would stop at start); did you mean 'enable_attention_dp'?",
        ),
        (
            lambda s: _options(s, enable_attention_dp=True),
            "enable_attention_dp: true but serving.parallelism.dp_attention is false; the kit "
            "plans with serving.parallelism.dp_attention: set it there and drop this key",
        ),
        (
            lambda s: _options(s, kv_cache_config={"dtype": "auto"}),
            "kv_cache_config.dtype: auto but model.kv_cache_dtype is fp8",
        ),
        (
            lambda s: _options(s, tensor_parallel_size=4),
            "tensor_parallel_size: 4 but serving.parallelism.tp is 8",
        ),
        (
            lambda s: _options(s, max_batch_size=128),
            "max_batch_size: 128 but serving.trtllm.max_batch_size is 256; keep one of the two",
        ),
        (
            lambda s: s["serving"].update(framework="vllm", engine_args={}),
            "serving.trtllm: the trtllm block is for framework: trtllm (this spec serves with "
            "vllm)",
        ),
    ],
)
def test_what_trtllm_cannot_run_is_refused_naming_the_field_and_the_fix(tmp_path, change, expected):
    spec = data()
    change(spec)
    found = problems(tmp_path, spec)
    assert any(expected in message for message in found), found


def test_options_that_agree_with_the_spec_and_trtllms_own_keys_are_accepted(tmp_path):
    """InferenceX's H200 keys, and the derived ones repeated with the spec's values."""
    spec = data()
    _options(
        spec,
        enable_attention_dp=False,
        kv_cache_config={"dtype": "fp8", "free_gpu_memory_fraction": 0.85},
        max_batch_size=256,
        print_iter_log=True,
        stream_interval=10,
        moe_config={"backend": "CUTLASS"},
        num_postprocess_workers=4,
    )
    options = yaml.safe_load(launch_of(tmp_path, spec).files[OPTIONS_FILE])
    assert options["kv_cache_config"] == {"dtype": "fp8", "free_gpu_memory_fraction": 0.85}
    assert options["stream_interval"] == 10


def test_dp_attention_with_trtllm_is_its_enable_attention_dp(tmp_path):
    spec = data()
    _moe(spec, tp=8, dp=8, ep=8, dp_attention=True)
    assert load_spec(write(tmp_path, spec)).serving.parallelism.dp_attention


# the check ----------------------------------------------------------------------------------


@pytest.mark.process
def test_the_check_says_trtllm_is_not_installed_here(tmp_path):
    spec = load_spec(REPO / "pocs" / NAME / "poc.yaml")
    ctx = LaunchContext(repo=REPO, python=sys.executable)
    launches = ADAPTERS["trtllm"].plan(spec, ctx)
    with pytest.raises(ArgcheckUnavailable, match="tensorrt_llm"):
        ADAPTERS["trtllm"].check(launches, ctx)
    # an unknown key in the file (written past the rules) is still reported by the kit's table
    options = yaml.safe_load(launches[0].files[OPTIONS_FILE])
    launches[0].files[OPTIONS_FILE] = yaml.safe_dump({**options, "cuda_graph_configs": {}})
    ((_, message),) = ADAPTERS["trtllm"].check(launches, ctx)
    assert "'cuda_graph_configs' is not an LLM API option" in message
    assert "did you mean 'cuda_graph_config'?" in message


STAND_IN = {
    "tensorrt_llm/__init__.py": "",
    "tensorrt_llm/commands/__init__.py": "",
    "tensorrt_llm/commands/serve.py": """
        import click

        @click.command("serve")
        @click.argument("model")
        @click.option("--tp_size", type=int, default=1)
        @click.option("--backend", type=click.Choice(["pytorch", "tensorrt"]), default="pytorch")
        @click.option("--extra_llm_api_options", type=str, default=None)
        def serve(model, tp_size, backend, extra_llm_api_options):
            raise AssertionError("the check must parse, not run")
    """,
    "tensorrt_llm/llmapi/__init__.py": "",
    "tensorrt_llm/llmapi/llm_args.py": """
        from typing import Optional
        from pydantic import BaseModel, ConfigDict, Field

        class KvCacheConfig(BaseModel):
            model_config = ConfigDict(extra="forbid")
            dtype: str = "auto"
            free_gpu_memory_fraction: Optional[float] = Field(default=0.9, ge=0, le=1)

        class TorchLlmArgs(BaseModel):
            model_config = ConfigDict(extra="forbid")
            model: str
            enable_attention_dp: bool = False
            kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
    """,
}


@pytest.mark.process
def test_the_check_script_reports_tensorrt_llms_parser_and_field_errors(tmp_path):
    """Against a stand-in ``tensorrt_llm`` (a click ``serve`` and a pydantic ``TorchLlmArgs``
    shaped like the real ones): the script's plumbing, not TensorRT-LLM's own verdicts."""
    for name, text in STAND_IN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    items = [
        {"argv": ["m", "--tp_size", "8"], "options": {"kv_cache_config": {"dtype": "fp8"}}},
        {"argv": ["m", "--tp-size", "8"], "options": {}},
        {"argv": ["m", "--backend", "onnx"], "options": None},
        {"argv": ["m"], "options": {"kv_cache_config": {"free_gpu_memory_fraction": 2}}},
        {"argv": ["m"], "options": {"enable_atention_dp": True}},
    ]
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "trtllm_args.py")],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    ok, flag, choice, bound, key = json.loads(result.stdout)
    assert ok is None
    assert "No such option '--tp-size'" in flag
    assert "'onnx' is not one of 'pytorch', 'tensorrt'" in choice
    assert bound.startswith("kv_cache_config.free_gpu_memory_fraction: Input should be less")
    assert key == "enable_atention_dp: not a TorchLlmArgs field (extra inputs are not permitted)"
