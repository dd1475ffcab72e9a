"""The POC spec: pydantic models, one per section of ``pocs/<name>/poc.yaml``.

Every field has a description; ``pocs/SPEC.md`` is generated from them
(``pocforge schema --markdown``) and a test keeps it in sync.  Models forbid unknown
keys so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from pocforge.catalog import ModelFacts, gpu_names
from pocforge.spec.disagg import SGLANG_A2A, VLLM_A2A, DeepepMode, Disaggregation, KvOffload
from pocforge.spec.gates import AccuracyTask, ParityGate, SanityGate
from pocforge.spec.values import EngineArg

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
KERNEL_OPS = (
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "gelu_and_mul",
    "flash_attention_prefill",
    "paged_attention_decode",
    "fused_moe",
    "mla_decode",
    "fp8_quant",
    "fp8_gemm",
)
KernelOp = Literal[KERNEL_OPS]  # type: ignore[valid-type]
SECRET = {"secret": True}  # json_schema_extra marking a field that may hold ${ENV} secrets


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


# --------------------------------------------------------------------------- poc


class PocMeta(Strict):
    name: str = Field(
        pattern=NAME_PATTERN,
        description="POC name; must equal its folder name. Convention: `<model>-<precision>-<gpu>-<framework>`.",
    )
    customer: str = Field(min_length=1, description="Customer the POC is for.")
    owner: str = Field(min_length=1, description="Engineer responsible (name or e-mail).")
    description: str = Field(
        "", description="What the customer wants proven, in a sentence or two."
    )
    tags: list[str] = Field(default_factory=list, description="Free-form labels for `pocforge ls`.")
    language: Literal["en", "zh-CN"] = Field(
        "en",
        description="The language of the customer's dashboard and PDF (`pocforge report RUN --lang` renders any run in another, without re-running).",
    )


# --------------------------------------------------------------------------- model


class TinyModel(Strict):
    arch: Literal["llama", "qwen-moe"] = Field(
        "llama",
        description="Architecture of the tiny random-initialised model the kit builds locally.",
    )
    seed: int = Field(0, ge=0, description="Seed for weights and tokenizer: same seed, same bytes.")


class WeightsStaging(Strict):
    source: str = Field(
        min_length=1,
        description="Where the weights are: a path every node sees (NFS, Lustre), `s3://bucket/prefix` or `hf://org/name` (a mirror).",
    )
    dest: str = Field(
        "/opt/pocforge/models/model",
        description="Local folder on every node that receives them (bring-up copies once).",
    )


class ModelSpec(Strict):
    id: str = Field(
        min_length=1,
        description="Hugging Face model id (`org/name`) or a local folder (relative to the POC folder).",
    )
    served_name: str | None = Field(
        None, description="Name clients use in requests; defaults to `id`."
    )
    revision: str | None = Field(None, description="Hub revision (commit or tag) to pin.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weights and activations dtype."
    )
    quantization: Literal["none", "fp8", "fp8_block", "int8", "awq", "gptq", "mxfp4"] = Field(
        "none",
        description="Weight quantization, passed as the framework's `--quantization` (`spec/quantization.py`): `fp8` a checkpoint's own FP8 or online per-tensor FP8; `fp8_block` a block-FP8 checkpoint such as DeepSeek-V3's (passed as `fp8`; the block size comes from its config.json); `int8` SGLang's `w8a8_int8` (vLLM has no such flag: refused); `awq`, `gptq`, `mxfp4` as named.",
    )
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="KV-cache dtype."
    )
    max_model_len: int | None = Field(
        None, ge=1, description="Longest sequence (prompt + output) to serve."
    )
    facts: ModelFacts | None = Field(
        None,
        description="Architecture facts for models whose `config.json` is not at hand; they override what the config says.",
    )
    weights: WeightsStaging | None = Field(
        None, description="Stage the weights to every node's local disk during bring-up."
    )
    tiny: TinyModel | None = Field(
        None,
        description="Build a tiny random model into `id` (a local folder) instead of using real weights; for CPU demos and tests.",
    )
    hf_token: SecretStr | None = Field(
        None, description="Hub token for gated models; use `${HF_TOKEN}`.", json_schema_extra=SECRET
    )


# --------------------------------------------------------------------------- cluster


class Interconnect(Strict):
    scale_up: Literal["xgmi", "nvlink", "pcie", "none"] = Field(
        "none", description="GPU-to-GPU link inside a node."
    )
    scale_out: Literal[
        "roce-400g", "roce-200g", "ib-ndr-400g", "ib-xdr-800g", "ib-hdr-200g", "ethernet", "none"
    ] = Field("none", description="Network between nodes.")
    nics_per_node: int = Field(0, ge=0, description="RDMA NICs per node used for collectives.")


class Host(Strict):
    name: str = Field(pattern=NAME_PATTERN, description="Inventory hostname.")
    address: str = Field(min_length=1, description="Address or DNS name to reach it over SSH.")


class Ssh(Strict):
    user: str = Field("root", description="SSH user on the nodes.")
    port: int = Field(22, ge=1, le=65535, description="SSH port.")
    key_file: str | None = Field(
        None, description="Private key file; default: the SSH agent / ~/.ssh."
    )
    password: SecretStr | None = Field(
        None,
        description="SSH password when keys are not possible; use `${ENV}`.",
        json_schema_extra=SECRET,
    )
    become: bool | None = Field(
        None,
        description="Run the few tasks that need root (the kit's folder `/opt/pocforge`, the GPU and PCIe probes, a weights folder outside it) through sudo; default: when `user` is not root. Passwordless sudo, or `ansible_become_password` in the inventory.",
    )
    host_keys: Literal["tofu", "strict", "off"] = Field(
        "tofu",
        description="Checking the nodes' SSH host keys against `known_hosts`: `tofu` trusts a node's key the first time and refuses a changed one; `strict` accepts only keys already in the file; `off` checks nothing (a man in the middle goes unnoticed; the run records and prints that it was off).",
    )
    known_hosts: str = Field(
        "known_hosts",
        description="The POC's known-hosts file (relative to the POC folder): the nodes' keys, recorded at first contact, reviewed like the rest of the POC.",
    )


class ClusterSpec(Strict):
    gpu: str = Field(
        description="GPU type from the catalog (MI300X, MI325X, MI355X, H100, H200, B200, or `cpu`)."
    )
    nodes: int = Field(1, ge=1, description="Number of nodes.")
    gpus_per_node: int = Field(
        8, ge=1, description="GPUs used on each node (for `cpu`: worker processes)."
    )
    interconnect: Interconnect = Field(
        default_factory=Interconnect, description="Links inside and between nodes."
    )
    inventory: str | None = Field(
        None,
        description="Ansible inventory (relative to the POC folder); default: built from `hosts`.",
    )
    hosts: list[Host] = Field(
        default_factory=list, description="The nodes, when no inventory is given; one per node."
    )
    ssh: Ssh = Field(default_factory=Ssh, description="How Ansible reaches the nodes.")

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in gpu_names():
            raise ValueError(f"unknown GPU type {value!r} (allowed: {', '.join(gpu_names())})")
        return value

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


# --------------------------------------------------------------------------- serving


def _lengths(value: Any) -> Any:
    """``512`` is shorthand for the fixed length ``{mean: 512}``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"mean": value}
    return value


class Lengths(Strict):
    distribution: Literal["fixed", "uniform", "normal"] = Field(
        "fixed", description="How token counts are drawn."
    )
    mean: int = Field(ge=1, description="Mean (or fixed) token count.")
    std: float = Field(0, ge=0, description="Standard deviation (normal).")
    min: int | None = Field(None, ge=1, description="Lower bound (uniform) or clip (normal).")
    max: int | None = Field(None, ge=1, description="Upper bound (uniform) or clip (normal).")

    @model_validator(mode="after")
    def _shape(self) -> Lengths:
        if self.distribution == "uniform" and (self.min is None or self.max is None):
            raise ValueError("a uniform distribution needs min and max")
        if self.distribution == "normal" and self.std == 0:
            raise ValueError(f"a {self.distribution} distribution needs std > 0")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


TokenCount = Annotated[Lengths, BeforeValidator(_lengths)]


class RandomDataset(Strict):
    kind: Literal["random"] = Field(description="Random token ids with exact lengths.")
    isl: TokenCount = Field(description="Input length in tokens: a number or a distribution.")
    osl: TokenCount = Field(description="Output length in tokens: a number or a distribution.")


class ShareGPTDataset(Strict):
    kind: Literal["sharegpt"] = Field(description="Conversations from a ShareGPT-format JSON file.")
    path: str = Field(min_length=1, description="The JSON file (relative to the POC folder).")
    osl: TokenCount | None = Field(
        None, description="Override output lengths; default: the dataset's answers."
    )
    max_isl: int | None = Field(None, ge=1, description="Skip prompts longer than this.")


class SharedPrefixDataset(Strict):
    kind: Literal["shared_prefix"] = Field(
        description="Groups of prompts sharing a system prefix (prefix caching)."
    )
    groups: int = Field(ge=1, description="Distinct prefixes.")
    prompts_per_group: int = Field(ge=1, description="Prompts per prefix.")
    prefix_len: int = Field(ge=1, description="Shared prefix length in tokens.")
    suffix_len: TokenCount = Field(description="Per-prompt suffix length.")
    osl: TokenCount = Field(description="Output length.")


class TraceDataset(Strict):
    kind: Literal["trace"] = Field(
        description="Replay of a request trace (Mooncake-style JSONL: timestamp, input_length, output_length)."
    )
    path: str = Field(min_length=1, description="The JSONL trace (relative to the POC folder).")
    time_scale: float = Field(
        1.0, gt=0, description="Multiply inter-arrival times by this (0.5 = twice as fast)."
    )


class MultiTurnDataset(Strict):
    """Conversations that grow turn by turn, as LMCache's multi-round QA benchmark: each
    user's turn ``t`` is the shared system prompt, the user's previous questions and
    answers, and a new question. Sent turn by turn over all users (every user's turn 0,
    then every turn 1, ...), so with ``users`` ≥ the concurrency each turn leaves only
    after the same user's previous one finished; turn 0 finds nothing cached."""

    kind: Literal["multi_turn"] = Field(
        description="Multi-turn chat with a growing history (KV-cache reuse)."
    )
    users: int = Field(ge=1, description="Conversations.")
    turns: int = Field(ge=2, description="Turns per conversation.")
    system_prompt_len: int = Field(
        0, ge=0, description="Tokens of the system prompt every conversation shares."
    )
    question_len: TokenCount = Field(description="Tokens of each new question.")
    answer_len: TokenCount = Field(
        description="Tokens of each earlier answer as it appears in the history (synthetic "
        "text of that length, not the model's own answer)."
    )
    osl: TokenCount = Field(description="Output tokens asked for at each turn.")


class DocQaDataset(Strict):
    """Long-document QA with repeats: ``questions`` rounds over the same documents, round
    ``q`` asking each document's ``q``-th question; round 0 is the cache miss, the later
    rounds can reuse each document's KV."""

    kind: Literal["doc_qa"] = Field(description="Questions on long documents, asked in rounds.")
    documents: int = Field(ge=1, description="Distinct documents.")
    doc_len: int = Field(ge=1, description="Tokens per document.")
    questions: int = Field(ge=2, description="Questions per document (rounds).")
    question_len: TokenCount = Field(description="Tokens per question.")
    osl: TokenCount = Field(description="Output tokens per answer.")


Dataset = Annotated[
    RandomDataset
    | ShareGPTDataset
    | SharedPrefixDataset
    | TraceDataset
    | MultiTurnDataset
    | DocQaDataset,
    Field(discriminator="kind"),
]


class Load(Strict):
    concurrency: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, min_length=1, description="Closed loop: sweep over these maximum concurrencies."
    )
    request_rate: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, min_length=1, description="Open loop: sweep over these request rates (req/s)."
    )
    arrival: Literal["poisson", "gamma"] = Field(
        "poisson", description="Open-loop arrival process."
    )
    burstiness: float = Field(
        1.0, gt=0, description="Gamma shape factor (1 = Poisson; < 1 burstier)."
    )
    max_concurrency: int | None = Field(
        None, ge=1, description="Cap on in-flight requests in open loop."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Load:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError(
                "give exactly one of concurrency (closed loop) or request_rate (open loop)"
            )
        return self


class Slo(Strict):
    metric: Literal["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"] = Field(
        description="Latency metric."
    )
    percentile: Literal[50, 90, 95, 99, 99.9] = Field(
        99, description="Percentile the SLO is judged at."
    )
    max_ms: float = Field(gt=0, description="Upper bound in milliseconds.")


ProfilerTool = Literal["torch", "nsys", "rocprofv3"]
PROFILER_TOOL_HELP = (
    "Which profiler: `torch` (the framework's torch profiler: a Chrome trace and its table "
    "of operations), `nsys` (Nsight Systems around the launch, NVIDIA: a report per profiled "
    "range and its kernel summary) or `rocprofv3` (AMD: kernel trace and `--stats`). The GPU "
    "tools record only the chosen points or steps: the framework's CUDA-profiler switch "
    "gates them."
)
PMC_HELP = (
    "rocprofv3 only: hardware counters collected with the kernel trace (`--pmc`), e.g. "
    "`[SQ_WAVES, GRBM_GUI_ACTIVE]`; at most 8, in one pass."
)


class _GpuTool(Strict):
    tool: ProfilerTool = Field("torch", description=PROFILER_TOOL_HELP)
    counters: list[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_:\[\]]*$")]] = Field(
        default_factory=list, max_length=8, description=PMC_HELP
    )

    @model_validator(mode="after")
    def _counters_need_rocprofv3(self) -> _GpuTool:
        if self.counters and self.tool != "rocprofv3":
            raise ValueError(
                f"counters are rocprofv3's --pmc; tool is {self.tool}: set tool: rocprofv3 "
                "or remove counters"
            )
        return self


class Profile(_GpuTool):
    points: list[Annotated[str, Field(pattern=r"^[crt][0-9.]+$")]] = Field(
        min_length=1,
        description="Point ids as the summaries name them: `c64` (concurrency 64), `r4` (4 requests/s).",
    )
    requests: int | None = Field(
        None,
        ge=1,
        description="Requests in each profiled pass, at the point's own load and with no warm-up (default: a whole repeat of the point, its `num_prompts` and `duration_s`). vLLM's profiler records each engine's first 32 steps of the pass and SGLang's the whole pass: a few waves of the point's concurrency are enough.",
    )


class Workload(Strict):
    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Workload name; used in metric paths (`serving.<name>.ttft_ms.p99`).",
    )
    api: Literal["completions", "chat"] = Field(
        "completions", description="OpenAI endpoint: /v1/completions or /v1/chat/completions."
    )
    dataset: Dataset = Field(description="Where prompts come from.")
    load: Load = Field(description="The sweep: concurrencies or request rates.")
    num_prompts: int = Field(ge=1, description="Requests per sweep point.")
    duration_s: float | None = Field(
        None, gt=0, description="Also stop a point after this many seconds."
    )
    warmup: int = Field(
        0, ge=0, description="Requests sent before each point; excluded from statistics."
    )
    repeats: int = Field(1, ge=1, description="Repeats per point; ≥ 3 gives confidence intervals.")
    ignore_eos: bool = Field(
        True, description="Ask the server to ignore EOS so output lengths are exact."
    )
    seed: int = Field(0, description="Dataset and arrival seed.")
    slos: list[Slo] = Field(
        default_factory=list,
        description="Latency SLOs; goodput counts requests meeting all of them.",
    )
    profile: Profile | None = Field(
        None,
        description="Profile these sweep points (the framework's torch profiler, or `tool: nsys | rocprofv3`): each runs once more after its measured repeats with the profiler on, that pass left out of its statistics; the traces go into the run.",
    )


class Parallelism(Strict):
    tp: int = Field(1, ge=1, description="Tensor parallel size.")
    pp: int = Field(1, ge=1, description="Pipeline parallel size.")
    dp: int = Field(1, ge=1, description="Data parallel size.")
    ep: int = Field(1, ge=1, description="Expert parallel size (MoE only).")
    dp_attention: bool = Field(
        False,
        description="SGLang DP-attention: attention data-parallel inside the TP group (MoE only).",
    )
    all2all_backend: Literal[tuple(dict.fromkeys(VLLM_A2A + SGLANG_A2A))] | None = Field(  # type: ignore[valid-type]
        None,
        description="MoE all-to-all for expert parallelism: vLLM `--all2all-backend` (`deepep_high_throughput`, `deepep_low_latency`, `mori_high_throughput`, `allgather_reducescatter`, ...) or SGLang `--moe-a2a-backend` (`deepep`, `mori`, ...); default: the framework's.",
    )
    deepep_mode: DeepepMode | None = Field(
        None, description="SGLang with `all2all_backend: deepep`: `--deepep-mode`."
    )


class Runtime(Strict):
    """Where the framework runs on each node. Default: a container on AMD and NVIDIA GPUs
    for vLLM and SGLang (the kit's pinned image for the framework and GPU), a virtual
    environment built by bring-up for DeepSpeed, and the kit's own environments on `cpu`."""

    kind: Literal["container", "venv", "kit"] | None = Field(
        None,
        description="`container` (docker/podman), `venv` (a Python environment on the node) or `kit` (this machine's `.venv`, `cpu` only); default by GPU vendor and framework.",
    )
    image: str | None = Field(
        None,
        description="container: image to run; default: the kit's pinned image for the framework and GPU (`runtimes/images.yaml`).",
    )
    image_archive: str | None = Field(
        None,
        description="container: an image tarball (`docker save` / `podman save`) on the controller (relative: to the POC folder); bring-up copies it to a node that lacks the image and loads it there (nodes that reach no registry). Default: bring-up pulls the image.",
    )
    image_id: str | None = Field(
        None,
        pattern=r"^(sha256:)?[0-9a-f]{64}$",
        description="container: the id the image must have on every node (`docker image inspect --format '{{.Id}}'`, kept by `save`/`load`); bring-up fails a node whose image differs. Default: not checked.",
    )
    engine: Literal["docker", "podman"] = Field("docker", description="container: the engine.")
    mounts: list[str] = Field(
        default_factory=list,
        description="container: extra `host:container[:ro]` mounts (the weights, the run folder and the kit's wheels are mounted already).",
    )
    python: str | None = Field(
        None,
        description="venv: an existing interpreter on the nodes; default: the environment bring-up builds in `/opt/pocforge/venvs/<framework>`. container: the interpreter inside the image; default: `python3`.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment for the framework on every node, e.g. `NCCL_DEBUG: INFO`; it wins over the variables the kit derives from bring-up's facts (device visibility, `NCCL_IB_HCA`, `NCCL_IB_GID_INDEX`, `NCCL_SOCKET_IFNAME`: `pocforge.runtimes.platform_env`). vLLM's AITER switch is typed: `serving.platform.aiter`.",
    )


class ServingPlatform(Strict):
    """Typed switches a framework offers for one GPU platform; each becomes the variable the
    framework reads (``pocforge.runtimes.platform_env``). Unset: the framework's default."""

    aiter: bool | None = Field(
        None,
        description="vLLM on AMD GPUs: use AITER's ROCm kernels (`VLLM_ROCM_USE_AITER=1`, `false` sets `0`); vLLM's default is off. Refused for SGLang and for NVIDIA or `cpu` clusters.",
    )


class TrtllmServe(Strict):
    """TensorRT-LLM's OpenAI server, `trtllm-serve` with its PyTorch backend (`framework:
    trtllm`, one NVIDIA node). Unset: TensorRT-LLM's default. Other `trtllm-serve` flags go in
    `serving.engine_args` under their own names (`num_postprocess_workers: 4`)."""

    max_batch_size: int | None = Field(
        None,
        ge=1,
        description="Requests the engine schedules at once (`--max_batch_size`); TensorRT-LLM's default: 2048.",
    )
    max_num_tokens: int | None = Field(
        None,
        ge=1,
        description="Tokens batched into one forward pass (`--max_num_tokens`); TensorRT-LLM's default: 8192.",
    )
    kv_cache_free_gpu_memory_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Share of the GPU memory the weights leave that the KV cache takes (`--kv_cache_free_gpu_memory_fraction`); TensorRT-LLM's default: 0.9.",
    )
    llm_api_options: dict[str, Any] = Field(
        default_factory=dict,
        description="LLM API options (`TorchLlmArgs` fields), written to `extra-llm-api-options.yaml` and passed as `--extra_llm_api_options`, e.g. `cuda_graph_config: {enable_padding: true, max_batch_size: 128}`, `kv_cache_config: {enable_block_reuse: false}`, `stream_interval: 10`. Top-level keys are checked against TensorRT-LLM's (`pocforge.spec.trtllm_options`). Attention DP (`enable_attention_dp`), the KV-cache dtype (`kv_cache_config.dtype`), `dtype`, `max_seq_len` and the parallel sizes come from `serving.parallelism` and `model`; a key here that names one must agree with it.",
    )


class ServingSpec(Strict):
    framework: Literal["vllm", "sglang", "trtllm"] = Field(
        description="Serving framework; `trtllm` is TensorRT-LLM's `trtllm-serve` (NVIDIA GPUs, one node)."
    )
    version: str | None = Field(
        None, description="Exact framework version the POC is pinned to (e.g. `0.32.0`)."
    )
    parallelism: Parallelism = Field(
        default_factory=Parallelism, description="How one replica is split over GPUs."
    )
    replicas: int = Field(
        1, ge=1, description="Independent copies of the deployment behind the load generator."
    )
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of the server.")
    startup_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds a server may take to answer its health URL; default: the weights' bytes at 1 GB/s plus 300 s for compiling (`pocforge.frameworks.startup`).",
    )
    engine_args: dict[str, EngineArg] = Field(
        default_factory=dict,
        description="Extra engine arguments, passed through (`max-num-seqs: 256`); for `trtllm` the `trtllm-serve` flags under their own underscore names (`num_postprocess_workers: 4`, `trust_remote_code: true`).",
    )
    kernels: list[KernelOp] = Field(
        default_factory=list, description="Kit kernels to plug into the framework."
    )
    workloads: list[Workload] = Field(min_length=1, description="The acceptance workloads.")
    runtime: Runtime = Field(
        default_factory=Runtime, description="Where the server runs on each node."
    )
    platform: ServingPlatform | None = Field(
        None,
        description="The framework's switches for this GPU platform, typed (a variable set in `runtime.env` as well must agree).",
    )
    trtllm: TrtllmServe | None = Field(
        None,
        description="TensorRT-LLM's server settings and LLM API options (`framework: trtllm` only); default: TensorRT-LLM's own.",
    )
    sanity: SanityGate = Field(
        default_factory=SanityGate,
        description="Fixed prompts answered before any sweep; a broken answer stops the stage.",
    )
    accuracy: list[AccuracyTask] = Field(
        default_factory=list,
        description="lm-evaluation-harness tasks run against this deployment after the sweeps.",
    )
    parity: ParityGate | None = Field(
        None,
        description="Serve fixed prompts with and without the POC's kernels and patches and compare tokens and log-probabilities (needs `kernels` or patches).",
    )
    disaggregation: Disaggregation | None = Field(
        None,
        description="Prefill/decode disaggregation: pools, KV connector and router (vLLM, SGLang); `parallelism` and `replicas` then stay at their defaults.",
    )
    kv_offload: KvOffload | None = Field(
        None, description="A host-memory KV tier, the engine's own (GPU builds only)."
    )


# --------------------------------------------------------------------------- training


class TrainingTargets(Strict):
    tokens_per_s_per_gpu: float | None = Field(
        None, gt=0, description="Throughput the customer expects."
    )
    mfu: float | None = Field(
        None, gt=0, le=1, description="Model FLOPs utilisation expected (0–1)."
    )


class MegatronData(Strict):
    """Where Megatron reads its tokens: mock data, or a preprocessed dataset on every node."""

    kind: Literal["mock", "dataset"] = Field(
        "mock",
        description="`mock`: Megatron's `--mock-data` with the `NullTokenizer` (random tokens, the throughput benchmark); `dataset`: a preprocessed Megatron dataset (`--data-path`).",
    )
    path: str | None = Field(
        None,
        description="dataset: the prefix of the `.bin`/`.idx` pair on every node (`--data-path`).",
    )
    tokenizer: str | None = Field(
        None,
        description="dataset: a Hugging Face tokenizer folder or id on the nodes (`--tokenizer-type HuggingFaceTokenizer --tokenizer-model`).",
    )

    @model_validator(mode="after")
    def _dataset_needs_path(self) -> MegatronData:
        if self.kind == "dataset" and not (self.path and self.tokenizer):
            raise ValueError("a `dataset` needs both `path` and `tokenizer`")
        if self.kind == "mock" and (self.path or self.tokenizer):
            raise ValueError("`path` and `tokenizer` are for `kind: dataset`; mock data has none")
        return self


class MegatronLayout(Strict):
    """Megatron-LM's parallel layout and switches; data parallelism is what the world size
    leaves: `dp = world / (tp · pp · cp)`."""

    tp: int = Field(1, ge=1, description="Tensor parallel size (`--tensor-model-parallel-size`).")
    pp: int = Field(
        1, ge=1, description="Pipeline parallel size (`--pipeline-model-parallel-size`)."
    )
    vpp: int | None = Field(
        None,
        ge=2,
        description="Virtual pipeline stages per pipeline rank (interleaved 1F1B); needs `pp > 1` and layers divisible by `pp · vpp`.",
    )
    cp: int = Field(1, ge=1, description="Context parallel size (`--context-parallel-size`).")
    cp_comm_type: Literal["p2p", "a2a", "allgather", "a2a+p2p"] = Field(
        "p2p", description="How context-parallel ranks exchange keys and values (`--cp-comm-type`)."
    )
    ep: int = Field(
        1, ge=1, description="Expert parallel size (`--expert-model-parallel-size`); MoE only."
    )
    expert_tp: int | None = Field(
        None,
        ge=1,
        description="Tensor parallel size inside each expert (`--expert-tensor-parallel-size`); default: Megatron's (equal to `tp`).",
    )
    sequence_parallel: bool = Field(
        False, description="Megatron sequence parallelism (`--sequence-parallel`); needs `tp > 1`."
    )
    recompute: Literal["none", "selective", "full"] = Field(
        "none",
        description="Activation recompute: `selective` (attention core) or `full` (every layer, uniform, one layer per chunk).",
    )
    distributed_optimizer: bool = Field(
        False,
        description="Shard the optimizer state over data-parallel ranks (`--use-distributed-optimizer`).",
    )
    fp8: Literal["hybrid", "e4m3"] | None = Field(
        None,
        description="FP8 training with Transformer Engine (`--fp8-format`, `--transformer-impl transformer_engine`); GPUs with FP8 only.",
    )
    entry: Literal["megatron-lm", "primus"] = Field(
        "megatron-lm",
        description="What runs on the nodes: Megatron-LM's `pretrain_gpt.py` (ROCm/Megatron-LM or NVIDIA's container) or AMD Primus's Megatron backend.",
    )
    path: str = Field(
        "/workspace/Megatron-LM",
        description="Megatron-LM (or Primus) checkout on the nodes; the ROCm and NGC training containers keep it at `/workspace/Megatron-LM`.",
    )
    data: MegatronData = Field(
        default_factory=MegatronData, description="Mock data or a preprocessed dataset."
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="More Megatron-LM arguments, appended as written (checked by Megatron's parser where it is installed).",
    )

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp


class TrainingProfile(_GpuTool):
    steps: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=1,
        description="Steps to profile, counted from 0: the profiler runs from the first to the last of them (`[2, 3]`: steps 2 and 3).",
    )


class TrainingSpec(Strict):
    framework: Literal["deepspeed", "megatron"] = Field(
        description="Training framework: DeepSpeed (ZeRO) or Megatron-LM / Megatron-Core."
    )
    version: str | None = Field(None, description="Exact framework version.")
    zero_stage: Literal[0, 1, 2, 3] = Field(2, description="DeepSpeed ZeRO stage.")
    offload: Literal["none", "optimizer", "parameters", "both"] = Field(
        "none", description="ZeRO offload to CPU memory."
    )
    megatron: MegatronLayout | None = Field(
        None,
        description="Megatron's layout and switches (`framework: megatron`); default: every GPU data parallel.",
    )
    dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Training precision."
    )
    world_size: int | None = Field(
        None, ge=1, description="Processes (GPUs) training; default: every GPU of the cluster."
    )
    micro_batch: int = Field(1, ge=1, description="Sequences per GPU per micro-step.")
    grad_accum: int = Field(1, ge=1, description="Gradient accumulation steps.")
    seq_len: int = Field(ge=1, description="Tokens per sequence.")
    steps: int = Field(ge=1, description="Optimizer steps to run.")
    warmup_steps: int = Field(1, ge=0, description="Steps excluded from throughput.")
    lr: float = Field(1e-4, gt=0, description="Learning rate (AdamW).")
    gradient_clipping: float = Field(1.0, ge=0, description="Gradient norm clip; 0 disables.")
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds the whole training run may take before it is stopped; default: startup (as for serving) plus every step at 5% of the GPU's peak (`pocforge.frameworks.startup`).",
    )
    ds_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra DeepSpeed config keys, merged over the generated ones.",
    )
    targets: TrainingTargets = Field(
        default_factory=TrainingTargets, description="Customer targets."
    )
    runtime: Runtime = Field(
        default_factory=Runtime, description="Where the training ranks run on each node."
    )
    profile: TrainingProfile | None = Field(
        None,
        description="Profile these steps on every rank: torch.profiler (a Chrome trace and the table of operations per rank in `training/profile/`), or `tool: nsys | rocprofv3` around the launch.",
    )


# --------------------------------------------------------------------------- kernels


class KernelAcceptance(Strict):
    op: KernelOp = Field(description="Kernel from the kit's library.")
    shapes: list[dict[str, int]] = Field(
        default_factory=list,
        description="Problem sizes, e.g. `{tokens: 4096, hidden: 8192}`; default: shapes derived from the model.",
    )
    dtypes: list[Literal["float32", "bfloat16", "float16", "fp8"]] = Field(
        default_factory=lambda: ["bfloat16"], description="Dtypes to check."
    )
    tolerance: float | None = Field(None, gt=0, description="Relative-error tolerance override.")


class KernelsSpec(Strict):
    ops: list[KernelAcceptance] = Field(
        min_length=1, description="Kernels to accept on the cluster's GPUs."
    )


# --------------------------------------------------------------------------- acceptance

_CRITERION = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.\-]+)\s*(?P<op><=|>=|<|>)\s*(?P<threshold>[-+0-9.eE]+)\s*$"
)


def _criterion(value: Any) -> Any:
    """``"serving.chat.ttft_ms.p99 <= 2000"`` is shorthand for the mapping form."""
    if isinstance(value, str):
        match = _CRITERION.match(value)
        if not match:
            raise ValueError(
                f"cannot read criterion {value!r}; write it as 'serving.<workload>.<metric>.<statistic> <= <number>'"
            )
        return {"metric": match["metric"], "op": match["op"], "threshold": match["threshold"]}
    return value


class Criterion(Strict):
    metric: str = Field(
        description="Metric path: `serving.<workload>.<metric>[.<statistic>]`, `training.<metric>`, `kernels.<op>.<metric>`, `collectives.<collective>.<metric>`, `accuracy.<task>.<metric>` (the task's lm-eval metric) or `parity.<metric>`."
    )
    op: Literal["<=", "<", ">=", ">"] = Field(description="Comparator.")
    threshold: float = Field(description="Value the metric is compared with.")
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1,
        description="Confidence level of the interval the verdict is judged with.",
    )

    @property
    def parts(self) -> list[str]:
        """The metric path split at dots, keeping ``p99.9`` whole."""
        parts = self.metric.split(".")
        if parts[-2:] == ["p99", "9"]:
            parts = [*parts[:-2], "p99.9"]
        return parts

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


class AcceptanceSpec(Strict):
    criteria: list[Annotated[Criterion, BeforeValidator(_criterion)]] = Field(
        default_factory=list,
        description="What the customer accepts: each judged pass, fail or inconclusive.",
    )


# --------------------------------------------------------------------------- compare


class PublishedSource(Strict):
    """Where a competitor's numbers were published: the dashboard labels them "published,
    not measured here" and names this source."""

    url: str = Field(pattern=r"^https?://", description="Address of the published result.")
    seen: dt.date = Field(description="When it was read (YYYY-MM-DD).")
    publisher: str = Field(
        min_length=1, description="Who published it, e.g. `MLCommons (NVIDIA submission)`."
    )


class Competitor(Strict):
    name: str = Field(
        min_length=1, description="Label in the dashboard, e.g. `H200 vLLM (customer run)`."
    )
    file: str = Field(min_length=1, description="Result file (relative to the POC folder).")
    format: Literal[
        "pocforge",
        "vllm",
        "sglang",
        "aiperf",
        "guidellm",
        "mad",
        "trtllm-bench",
        "mlperf",
        "published",
    ] = Field(
        description="Tool that produced the file; `published`: a small YAML file of numbers a vendor or benchmark site printed, with its source and date (`pocforge.results.importers.published`); `mlperf`: an MLPerf Inference LoadGen summary."
    )
    workload: str | None = Field(
        None,
        description="Our workload it is compared with; default: the workload of the same name, or every workload when the file has one result.",
    )
    published: PublishedSource | None = Field(
        None,
        description="For a result file taken from a publication (an MLPerf submission, a vendor's page): where and when; `format: published` files carry their own.",
    )
    gpu: str | None = Field(None, description="GPU type it ran on.")
    gpus: int | None = Field(None, ge=1, description="GPUs it used (for per-GPU comparisons).")
    price_per_gpu_hour: float | None = Field(
        None,
        gt=0,
        description="For per-dollar comparisons; default: the catalog's price for `gpu` on `compare.price_basis`.",
    )
    power_w_per_gpu: float | None = Field(None, gt=0, description="For per-watt comparisons.")


class CompareSpec(Strict):
    baselines: list[str] = Field(
        default_factory=list, description="Earlier runs (`<poc>/<run-id>`) to compare against."
    )
    competitors: list[Competitor] = Field(
        default_factory=list, description="Other results on the same workload."
    )
    price_basis: str = Field(
        "owning-hyperscaler-tco",
        description="Which GPU-hour price table of the catalog (`catalog/prices.yaml`) per-dollar comparisons use, for both sides: compare like with like.",
    )
    price_per_gpu_hour: float | None = Field(
        None,
        gt=0,
        description="Our GPU-hour price (the customer's own rate); default: the catalog's price for the cluster's GPU on `price_basis`.",
    )


# --------------------------------------------------------------------------- the spec


class PocSpec(Strict):
    """A customer POC: what to deploy where, what to run, and what counts as success."""

    include: str | list[str] | None = Field(
        None,
        description="Spec(s) to inherit from, relative to this file; deep merge, lists replace.",
        exclude=True,
    )
    poc: PocMeta = Field(description="Who and what the POC is.")
    model: ModelSpec = Field(description="The model under test.")
    cluster: ClusterSpec = Field(description="Where it runs.")
    serving: ServingSpec | None = Field(None, description="Serving deployment and workloads.")
    training: TrainingSpec | None = Field(None, description="Training benchmark.")
    kernels: KernelsSpec | None = Field(None, description="Kernel acceptance.")
    acceptance: AcceptanceSpec = Field(
        default_factory=AcceptanceSpec, description="Acceptance criteria."
    )
    compare: CompareSpec = Field(
        default_factory=CompareSpec, description="Baselines and competitors."
    )

    _file: Path | None = PrivateAttr(None)
    _hash: str = PrivateAttr("")
    _unset_secrets: list = PrivateAttr(default_factory=list)

    def require_secrets(self) -> None:
        """Raise ``SpecError`` if a secret's ``${VAR}`` is not set (call before using secrets)."""
        if self._unset_secrets:
            from pocforge.spec.errors import SpecError

            raise SpecError(list(self._unset_secrets))

    @property
    def source_file(self) -> Path | None:
        return self._file

    @property
    def source_dir(self) -> Path | None:
        return self._file.parent if self._file else None

    @property
    def spec_hash(self) -> str:
        """sha256 of the resolved spec (secrets excluded), for provenance."""
        return self._hash

    @property
    def name(self) -> str:
        return self.poc.name
