"""The spec's `serving:` section: the deployment (framework, parallelism, runtime, platform switches) and its workloads (datasets, load, SLOs, profiles).

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    model_validator,
)

from pocforge.spec.base import REFERENCES, ProfilerChoice, Strict
from pocforge.spec.disagg import SGLANG_A2A, VLLM_A2A, DeepepMode, Disaggregation, KvOffload
from pocforge.spec.gates import AccuracyTask, ParityGate, SanityGate
from pocforge.spec.kernels_schema import KernelOp
from pocforge.spec.values import EngineArg


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


class Profile(ProfilerChoice):
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

    def point_ids(self) -> list[str]:
        """The sweep's points as its summaries name them: ``c<concurrency>``,
        ``r<rate>``, or the trace's ``t<speed>``."""
        if self.dataset.kind == "trace":
            return [f"t{1.0 / self.dataset.time_scale:g}"]
        if self.load.concurrency is not None:
            return [f"c{c}" for c in self.load.concurrency]
        return [f"r{r:g}" for r in self.load.request_rate]


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
    venv_archive: str | None = Field(
        None,
        description="venv: a tar of a ready environment, made at the path `python` names (its folder two levels up), on the controller (relative: to the POC folder); bring-up copies it to each node and unpacks it there instead of building one with pip (nodes that reach no package index; the CPU nodes' environment of a rehearsal, `make rehearsal-image`). Needs `python`. Default: bring-up builds the environment.",
    )
    python: str | None = Field(
        None,
        description="venv: an existing interpreter on the nodes; default: the environment bring-up builds in `/opt/pocforge/venvs/<framework>`. container: the interpreter inside the image; default: `python3`.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment for the framework on every node, e.g. `NCCL_DEBUG: INFO`; it wins over the variables the kit derives from bring-up's facts (device visibility, `NCCL_IB_HCA`, `NCCL_IB_GID_INDEX`, `NCCL_SOCKET_IFNAME`: `pocforge.runtimes.platform_env`). vLLM's AITER switch is typed: `serving.platform.aiter`. A secret is a reference, `HF_TOKEN: ${HF_TOKEN}`: bring-up puts this machine's value in a 0600 file on each node and the launches take it from there (`--env HF_TOKEN`), never written out.",
        json_schema_extra=REFERENCES,
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
        None,
        description="Exact framework version the POC is pinned to (e.g. `0.27.1`): the version its nodes run. `validate` holds it to the version inside the container image (the kit's catalog, `runtimes/images.yaml`) or in the kit's CPU environment, and (vLLM, SGLang) the launch flags to the flags that release defines, read from its source on the package index; bring-up's venv installs it.",
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
