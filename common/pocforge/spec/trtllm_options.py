"""TensorRT-LLM's own names: the flags ``trtllm-serve`` takes, the keys of its LLM API options
file (``--extra_llm_api_options``), and what a spec derives into that file.

One table for the adapter (``frameworks/trtllm.py``) and the rules (``spec/serving_rules.py``), so a
typo or a contradiction is refused by ``validate`` on a laptop, not by the server at start
on the customer's GPUs. Where ``tensorrt_llm`` is installed, the adapter's check runs its
own parser and ``TorchLlmArgs`` on the same launch as well (``frameworks/argcheck/``).

Sources, read 2026-12 from the NVIDIA/TensorRT-LLM repository (the kit's default image is
``nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14``, ``runtimes/images.yaml``):

- :data:`SERVE_FLAGS`: the click options of the ``serve`` command in
  ``tensorrt_llm/commands/serve.py`` (commit 00209af1, a 2026 main-branch version with the
  ``--config`` alias and the ``grpc`` command), every alias included (``--tp_size`` is
  ``--tensor_parallel_size``). The YAML file overrides the flags
  (``update_llm_args_with_extra_dict``; ``kv_cache_config`` is merged key by key).
- :data:`LLM_API_KEYS`: the fields of ``BaseLlmArgs`` and ``TorchLlmArgs`` in
  ``tensorrt_llm/llmapi/llm_args.py``, a version of the same period (its classes have
  ``custom_tokenizer``, ``env_overrides``, ``nvfp4_gemm_config`` and ``sampler_type``;
  the 1.4.0rc4 reference page adds ``post_processor_hook``, a later main removes
  ``sampler_type``). The exact release of either file is not recorded; 1.3.0rc14's own
  lists may differ by a few keys. ``TorchLlmArgs`` is what ``trtllm-serve --backend pytorch``
  builds (``LlmArgs = TorchLlmArgs``) and forbids other keys (pydantic ``extra="forbid"``),
  so an unknown key stops the server. Plus ``fail_fast_on_attention_window_too_large``,
  which that ``serve.py`` hands to the LLM API itself. The keys SemiAnalysis InferenceX's
  H200 ``trtllm-serve`` scripts write (``benchmarks/single_node/fixed_seq_len/
  dsr1_fp8_h200_trt.sh``, run on 1.3.0rc14, and ``deprecated/gptoss_fp4_h200_trt.sh``:
  ``cuda_graph_config``, ``enable_attention_dp``, ``attention_dp_config``,
  ``kv_cache_config``, ``moe_config``, ``print_iter_log``, ``stream_interval``,
  ``num_postprocess_workers``) are all in it.

A key a later TensorRT-LLM adds is refused here until it is added to the table, with its
source; the other direction (a key this table has and an older image lacks) is caught only
by ``TorchLlmArgs`` itself, where the check can import it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from pocforge.spec.schema import PocSpec
from pocforge.spec.serving_schema import TrtllmServe

OPTIONS_FILE = "extra-llm-api-options.yaml"

SERVE_FLAGS = frozenset(
    {
        "tokenizer", "custom_tokenizer", "host", "port", "backend", "custom_module_dirs",
        "log_level", "max_beam_width", "max_batch_size", "max_num_tokens", "max_seq_len",
        "tensor_parallel_size", "tp_size", "pipeline_parallel_size", "pp_size",
        "context_parallel_size", "cp_size", "moe_expert_parallel_size", "ep_size",
        "moe_cluster_parallel_size", "cluster_size", "gpus_per_node",
        "free_gpu_memory_fraction", "kv_cache_free_gpu_memory_fraction",
        "num_postprocess_workers", "trust_remote_code", "revision", "config",
        "extra_llm_api_options", "reasoning_parser", "tool_parser",
        "metadata_server_config_file", "server_role",
        "fail_fast_on_attention_window_too_large", "otlp_traces_endpoint",
        "disagg_cluster_uri", "enable_chunked_prefill", "media_io_kwargs", "chat_template",
    }
)  # fmt: skip

# Flags the kit writes from the spec: the field to set instead.
KIT_FLAGS: dict[str, str] = {
    "host": "the kit binds 0.0.0.0 (or the local host of a test)",
    "port": "serving.port",
    "backend": "the kit serves with the PyTorch backend (--backend pytorch)",
    "tensor_parallel_size": "serving.parallelism.tp",
    "tp_size": "serving.parallelism.tp",
    "pipeline_parallel_size": "serving.parallelism.pp",
    "pp_size": "serving.parallelism.pp",
    "moe_expert_parallel_size": "serving.parallelism.ep",
    "ep_size": "serving.parallelism.ep",
    "max_batch_size": "serving.trtllm.max_batch_size",
    "max_num_tokens": "serving.trtllm.max_num_tokens",
    "free_gpu_memory_fraction": "serving.trtllm.kv_cache_free_gpu_memory_fraction",
    "kv_cache_free_gpu_memory_fraction": "serving.trtllm.kv_cache_free_gpu_memory_fraction",
    "max_seq_len": "model.max_model_len",
    "revision": "model.revision",
    "config": "serving.trtllm.llm_api_options",
    "extra_llm_api_options": "serving.trtllm.llm_api_options",
}

LLM_API_KEYS = frozenset(
    {
        # BaseLlmArgs
        "model", "tokenizer", "tokenizer_mode", "custom_tokenizer", "skip_tokenizer_init",
        "trust_remote_code", "tensor_parallel_size", "dtype", "revision",
        "tokenizer_revision", "model_kwargs", "pipeline_parallel_size",
        "context_parallel_size", "gpus_per_node", "moe_cluster_parallel_size",
        "moe_tensor_parallel_size", "moe_expert_parallel_size", "enable_attention_dp",
        "enable_lm_head_tp_in_adp", "pp_partition", "cp_config", "load_format",
        "enable_lora", "lora_config", "kv_cache_config", "enable_chunked_prefill",
        "guided_decoding_backend", "batched_logits_processor", "iter_stats_max_iterations",
        "request_stats_max_iterations", "peft_cache_config", "scheduler_config",
        "cache_transceiver_config", "sparse_attention_config", "speculative_config",
        "max_batch_size", "max_input_len", "max_seq_len", "max_beam_width",
        "max_num_tokens", "gather_generation_logits", "num_postprocess_workers",
        "postprocess_tokenizer_dir", "reasoning_parser", "decoding_config",
        "otlp_traces_endpoint", "backend", "return_perf_metrics",
        "perf_metrics_max_requests", "orchestrator_type", "env_overrides",
        # TorchLlmArgs (the PyTorch backend)
        "garbage_collection_gen0_threshold", "cuda_graph_config", "attention_dp_config",
        "disable_overlap_scheduler", "moe_config", "nvfp4_gemm_config", "attn_backend",
        "sampler_type", "sampler_force_async_worker", "enable_iter_perf_stats",
        "enable_iter_req_stats", "print_iter_log", "batch_wait_timeout_ms",
        "batch_wait_timeout_iters", "batch_wait_max_tokens_ratio", "torch_compile_config",
        "enable_autotuner", "enable_layerwise_nvtx_marker", "enable_min_latency",
        "stream_interval", "force_dynamic_quantization", "allreduce_strategy",
        "checkpoint_loader", "checkpoint_format", "kv_connector_config", "mm_encoder_only",
        "ray_worker_extension_cls", "ray_placement_config", "enable_sleep",
        "use_cute_dsl_blockscaling_mm", "use_cute_dsl_blockscaling_bmm",
        "disable_flashinfer_sampling", "max_stats_len", "layer_wise_benchmarks_config",
        # passed to the LLM API by trtllm-serve itself (serve.py get_llm_args)
        "fail_fast_on_attention_window_too_large",
    }
)  # fmt: skip

# model.kv_cache_dtype -> KvCacheConfig.dtype ("auto" keeps the checkpoint's own; TensorRT-LLM's
# FP8 KV cache is E4M3, so fp8_e5m2 has none).
KV_CACHE_DTYPES: dict[str, str] = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8"}


def settings(spec: PocSpec) -> TrtllmServe:
    assert spec.serving is not None
    return spec.serving.trtllm or TrtllmServe()


def planned_keys(spec: PocSpec) -> dict[str, tuple[Any, str]]:
    """LLM API keys the spec decides, because the kit plans and counts GPUs with them:
    dotted key -> (value, the spec field). ``llm_api_options`` may repeat one only with the
    same value."""
    assert spec.serving is not None
    par, model = spec.serving.parallelism, spec.model
    return {
        "tensor_parallel_size": (par.tp, "serving.parallelism.tp"),
        "pipeline_parallel_size": (par.pp, "serving.parallelism.pp"),
        "moe_expert_parallel_size": (par.ep, "serving.parallelism.ep"),
        "enable_attention_dp": (par.dp_attention, "serving.parallelism.dp_attention"),
        "dtype": (model.dtype, "model.dtype"),
        "max_seq_len": (model.max_model_len, "model.max_model_len"),
        "kv_cache_config.dtype": (
            KV_CACHE_DTYPES.get(model.kv_cache_dtype, model.kv_cache_dtype),
            "model.kv_cache_dtype",
        ),
        "model": (None, "model.id"),  # never from the file: the kit serves model.id
        "backend": ("pytorch", "the kit's --backend pytorch"),
    }


def flag_keys(spec: PocSpec) -> dict[str, tuple[Any, str]]:
    """LLM API keys ``serving.trtllm`` also sets as a flag: either may set them, both only
    with one value."""
    typed = settings(spec)
    return {
        "max_batch_size": (typed.max_batch_size, "serving.trtllm.max_batch_size"),
        "max_num_tokens": (typed.max_num_tokens, "serving.trtllm.max_num_tokens"),
        "kv_cache_config.free_gpu_memory_fraction": (
            typed.kv_cache_free_gpu_memory_fraction,
            "serving.trtllm.kv_cache_free_gpu_memory_fraction",
        ),
    }


def options_file(spec: PocSpec) -> dict[str, Any]:
    """The content of :data:`OPTIONS_FILE`: what the spec derives (the dtype, attention DP,
    the KV-cache dtype), then ``serving.trtllm.llm_api_options`` merged over it key by key."""
    assert spec.serving is not None
    model, par = spec.model, spec.serving.parallelism
    derived: dict[str, Any] = {}
    if model.dtype != "auto":
        derived["dtype"] = model.dtype
    if par.dp_attention:
        derived["enable_attention_dp"] = True
    kv_dtype = KV_CACHE_DTYPES.get(model.kv_cache_dtype, model.kv_cache_dtype)
    if kv_dtype != "auto":
        derived["kv_cache_config"] = {"dtype": kv_dtype}
    return _merge(derived, settings(spec).llm_api_options)


def server_numbers(spec: PocSpec) -> tuple[int | None, int | None]:
    """(max_batch_size, max_num_tokens) the server will run with, from the flag or the
    options file; None: TensorRT-LLM's default."""
    typed, options = settings(spec), settings(spec).llm_api_options
    batch = typed.max_batch_size or options.get("max_batch_size")
    tokens = typed.max_num_tokens or options.get("max_num_tokens")
    return (
        batch if isinstance(batch, int) else None,
        tokens if isinstance(tokens, int) else None,
    )


Finding = tuple[tuple[str | int, ...], str]


def problems(spec: PocSpec) -> Iterator[Finding]:
    """``serving.engine_args`` are ``trtllm-serve`` flags the kit does not write itself, and
    ``serving.trtllm.llm_api_options`` has only LLM API keys, none contradicting the spec."""
    assert spec.serving is not None
    for key in spec.serving.engine_args:
        message = flag_problem(key.removeprefix("--"))
        if message:
            yield (("serving", "engine_args", key), message)
    options = settings(spec).llm_api_options
    where = ("serving", "trtllm", "llm_api_options")
    for key in unknown_keys(options):
        yield ((*where, key), key_problem(key))
    for dotted, (value, field) in planned_keys(spec).items():
        found = _get(options, dotted)
        if found is _MISSING or found == value:
            continue
        if dotted in ("model", "backend"):
            told = f"{field} decides it"
        else:
            told = f"{field} is {_show(value)}"
        yield (
            (*where, *dotted.split(".")),
            f"{dotted}: {_show(found)} but {told}; the kit plans with {field}: set it there "
            "and drop this key",
        )
    for dotted, (value, field) in flag_keys(spec).items():
        found = _get(options, dotted)
        if found is not _MISSING and value is not None and found != value:
            yield (
                (*where, *dotted.split(".")),
                f"{dotted}: {_show(found)} but {field} is {_show(value)}; keep one of the two",
            )


def flag_problem(name: str) -> str | None:
    """Why ``--<name>`` cannot be a passthrough ``trtllm-serve`` flag (None: it can)."""
    if name in KIT_FLAGS:
        return f"--{name} is written by the kit from {KIT_FLAGS[name]}; set that instead"
    if name in SERVE_FLAGS:
        return None
    underscored = name.replace("-", "_")
    if underscored in SERVE_FLAGS:
        hint = f"; trtllm-serve's flags use underscores: {underscored}"
    else:
        hint = _did_you_mean(name, SERVE_FLAGS)
    return f"--{name} is not a trtllm-serve flag{hint}"


def unknown_keys(options: dict[str, Any]) -> list[str]:
    return [key for key in options if key not in LLM_API_KEYS]


def key_problem(key: str) -> str:
    return (
        f"{key!r} is not an LLM API option of TensorRT-LLM (TorchLlmArgs refuses unknown keys, "
        f"so trtllm-serve would stop at start){_did_you_mean(key, LLM_API_KEYS)}"
    )


def _did_you_mean(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


_MISSING = object()


def _get(options: dict[str, Any], dotted: str) -> Any:
    value: Any = options
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
