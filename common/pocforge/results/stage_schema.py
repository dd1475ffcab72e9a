"""The input contracts of the stages whose producers live elsewhere: the normalised serving
result that importers write and that the bench's ``summary.json`` is adapted into,
collective bandwidth tables, the cluster health matrix, kernel roofline rows and training
steps."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pocforge.results.base import Doc


class DefinitionDifference(Doc):
    """Where another tool's metric means something else than ours."""

    metric: str
    theirs: str
    ours: str
    effect: str = Field(description="What the difference does to the number.")


class ServingPoint(Doc):
    id: str = Field(description="c<N>, r<rate>, t<speed>, or the tool's label.")
    mode: Literal["concurrency", "rate", "trace", "unknown"]
    value: float | None
    status: Literal["ok", "failed", "interrupted"] = "ok"
    requests: int | None = Field(None, description="Requests completed (all repeats).")
    failed: int | None = None
    repeats: int = 1
    duration_s: float | None = None
    metrics: dict[str, dict[str, float | None]] = Field(
        default_factory=dict,
        description="metric -> statistic -> value; scalar metrics use the statistic 'value'.",
    )
    ci: dict[str, dict[str, tuple[float, float]]] = Field(
        default_factory=dict,
        description="metric -> statistic -> 95% interval across repeats, where known.",
    )
    per_repeat: dict[str, list[float]] = Field(
        default_factory=dict, description="Scalar metric -> value in each repeat."
    )
    client_limited: bool = False
    caveats: list[str] = Field(default_factory=list)
    records_file: str | None = Field(
        None, description="Per-request records (bench JSONL), relative to the stage folder."
    )
    telemetry_file: str | None = Field(
        None,
        description="The node's telemetry while the point ran (pocforge.telemetry JSONL), "
        "relative to the stage folder.",
    )


class ServingResult(Doc):
    """One workload's sweep, normalised: what importers write and the dashboard reads."""

    kind: Literal["pocforge-serving"] = "pocforge-serving"
    schema_version: Literal[1] = 1
    workload: str
    tool: str = Field(
        description="pocforge, vllm, sglang, aiperf, guidellm, mad, trtllm-bench, mlperf or published (numbers transcribed from a publication)."
    )
    tool_version: str | None = None
    source_file: str | None = None
    model: str | None = None
    gpus: int | None = Field(None, description="GPUs that served the workload.")
    gpu: str | None = None
    points: list[ServingPoint] = Field(default_factory=list)
    definitions: dict[str, str] = Field(
        default_factory=dict, description="The tool's own definitions of the metrics it reports."
    )
    differences: list[DefinitionDifference] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class CollectiveRow(Doc):
    bytes: int
    count: int
    dtype: str
    redop: str
    time_us: float = Field(description="Out-of-place time.")
    algbw_gbs: float
    busbw_gbs: float
    wrong: int | None
    inplace_time_us: float | None = None
    inplace_algbw_gbs: float | None = None
    inplace_busbw_gbs: float | None = None
    inplace_wrong: int | None = None


class CollectiveResult(Doc):
    """One nccl-tests / rccl-tests binary's table (``collectives/<name>.json``)."""

    kind: Literal["pocforge-collective"] = "pocforge-collective"
    schema_version: Literal[1] = 1
    # pocforge-gloo: the kit's CPU benchmark (pocforge.cluster.gloo_perf), nccl-tests' table
    tool: Literal["nccl-tests", "rccl-tests", "pocforge-gloo"]
    tool_version: str | None = None
    collective: str
    ranks: int
    nodes: int
    devices: list[str] = Field(default_factory=list)
    rows: list[CollectiveRow]
    avg_busbw_gbs: float | None = None
    out_of_bounds: int | None = None
    source_file: str | None = None
    scope: Literal["intra_node", "inter_node"] | None = Field(
        None, description="Within one node or across nodes; None when an import does not say."
    )
    host: str | None = Field(None, description="The node a run within one node ran on.")
    reference_busbw_gbs: float | None = Field(
        None,
        description="The platform's reference bus bandwidth (GB/s) for this collective and "
        "scope, the one the cluster stage compared against; None when there is none.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What the numbers cannot say exactly (a table cut before its trailer, an "
        "'error' column read as wrong values).",
    )


class HealthCheck(Doc):
    host: str
    check: str
    status: Literal["pass", "warn", "fail", "skip"]
    value: str | None = None
    detail: str | None = None


class ClusterHealth(Doc):
    """Host x check matrix of bring-up/preflight (``cluster/health.json``)."""

    kind: Literal["pocforge-cluster-health"] = "pocforge-cluster-health"
    schema_version: Literal[1] = 1
    checks: list[HealthCheck]


class KernelRow(Doc):
    op: str
    shape: dict[str, int]
    dtype: str
    time_us: float | None = None
    reference_time_us: float | None = None
    bound: Literal["memory", "compute"] | None = None
    pct_roofline: float | None = None
    speedup_vs_reference: float | None = None
    speedup_vs_peers: dict[str, float] = Field(
        default_factory=dict,
        description="Peer name (vLLM, torch SDPA, …) -> its median time / the kernel's; "
        "only peers that agree with the reference and were timed.",
    )
    max_rel_error: float | None = None
    ok: bool = True


class KernelResults(Doc):
    """Kernel roofline rows (``kernels/results.json``)."""

    kind: Literal["pocforge-kernels"] = "pocforge-kernels"
    schema_version: Literal[1] = 1
    gpu: str | None = None
    arch: str | None = None
    timed: bool = Field(True, description="False when times are not meaningful (interpreter).")
    rows: list[KernelRow]


class TrainingStep(Doc):
    step: int
    loss: float
    step_time_s: float | None = None
    tokens: int | None = None
    ended_unix_s: float | None = Field(
        None, description="Unix time the step ended (the kit's own runs), for the telemetry."
    )


class TrainingResult(Doc):
    """Training benchmark (``training/result.json``): the kit's own run, or another tool's
    log read by an importer (``tool`` names which; its definitions travel with it)."""

    kind: Literal["pocforge-training"] = "pocforge-training"
    schema_version: Literal[1] = 1
    tool: str = Field(
        "pocforge",
        description="pocforge (the kit's own benchmark), or the importer that read another "
        "tool's output: megatron-log, dgxc.",
    )
    tool_version: str | None = None
    source_file: str | None = Field(None, description="Imported file name(s), no directory.")
    model: str | None = None
    framework: str
    world_size: int
    gpu: str | None = None
    dtype: str | None = None
    warmup_steps: int = 0
    steps: list[TrainingStep]
    tokens_per_s_per_gpu: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    peak_memory_gb: float | None = None
    final_loss: float | None = None
    definitions: dict[str, str] = Field(
        default_factory=dict, description="The tool's own definitions of the numbers it reports."
    )
    differences: list[DefinitionDifference] = Field(default_factory=list)
    notes: list[str] = Field(
        default_factory=list, description="How an import got its numbers (window, sources)."
    )
