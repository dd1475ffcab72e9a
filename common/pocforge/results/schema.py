"""The result schema: versioned pydantic models of every file a run folder holds.

Each document carries ``kind`` and ``schema_version``. :func:`load_document` reads a file
of any known version and migrates it, one step at a time, to the current one, so a run
written by an older kit still opens. :func:`export_json_schemas` writes the JSON Schema of
every kind to ``results/schema/`` (a test keeps those files in sync with the models).

Besides the kit's own files (manifest, provenance), this module defines the input
contracts of stages whose producers live elsewhere: the normalised serving result that
importers write and that the bench's ``summary.json`` is adapted into, collective
bandwidth tables, the cluster health matrix, kernel roofline rows and training steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class SchemaError(ValueError):
    """A document that is not (or no longer) readable as its kind; one clear line."""


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


T = TypeVar("T", bound=Doc)


# --------------------------------------------------------------------------- manifest

StageStatus = Literal["running", "complete", "failed", "interrupted", "skipped"]
RunStatus = Literal["running", "complete", "failed", "interrupted"]


class FileEntry(Doc):
    sha256: str | None = Field(description="sha256 of the bytes; None while the file is open.")
    bytes: int = Field(ge=0, description="Size in bytes when last checksummed.")
    open: bool = Field(False, description="Still being appended to (checksummed when closed).")
    replacing: str | None = Field(
        None,
        description="sha256 of the new content while a rewrite is under way: a writer killed "
        "between the rename and the manifest update leaves a file that matches this one.",
    )


class StageRecord(Doc):
    status: StageStatus
    started_at: str
    finished_at: str | None = None
    error: str | None = Field(None, description="Exception type and message of a failed stage.")
    files: list[str] = Field(default_factory=list, description="Files the stage wrote.")


class KitInfo(Doc):
    version: str
    git_sha: str | None
    git_dirty: bool | None


class Writer(Doc):
    host: str
    pid: int


class ImportSource(Doc):
    tool: str
    file: str = Field(description="Original file name (no directory).")
    sha256: str


class RunManifest(Doc):
    """``run.json``: what the run is, what ran, and the checksum of every other file."""

    kind: Literal["pocforge-run"] = "pocforge-run"
    schema_version: Literal[2] = 2
    poc: str
    run_id: str
    status: RunStatus
    created_at: str
    updated_at: str
    spec: dict[str, Any] | None = Field(description="Resolved spec, secrets masked.")
    spec_hash: str | None
    kit: KitInfo
    writer: Writer | None = Field(None, description="Process writing the run (for liveness).")
    hosts: list[str] = Field(default_factory=list)
    stages: dict[str, StageRecord] = Field(default_factory=dict)
    files: dict[str, FileEntry] = Field(default_factory=dict, description="Path -> checksum.")
    imported_from: ImportSource | None = None


# --------------------------------------------------------------------------- provenance


class GpuInfo(Doc):
    index: int
    name: str
    vendor: Literal["amd", "nvidia", "other"]
    arch: str | None = None
    memory_gb: float | None = None
    driver: str | None = None
    firmware: str | None = Field(None, description="VBIOS / firmware version.")
    pci_bus: str | None = None


class NicInfo(Doc):
    name: str
    driver: str | None = None
    speed_mbps: int | None = None
    mtu: int | None = None
    rdma_device: str | None = None
    firmware: str | None = None


class HostFacts(Doc):
    hostname: str
    source: Literal["local", "ansible", "imported"] = "local"
    collected_at: str
    os: str | None = None
    kernel: str | None = None
    python: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_gb: float | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    nics: list[NicInfo] = Field(default_factory=list)
    stacks: dict[str, str | None] = Field(
        default_factory=dict, description="rocm, cuda, amdgpu/nvidia driver versions."
    )
    packages: dict[str, str | None] = Field(
        default_factory=dict, description="Framework and kernel-library versions."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Relevant environment variables, secrets removed."
    )


class PatchInfo(Doc):
    path: str
    sha256: str


class Provenance(Doc):
    """``provenance.json``: where and with what the numbers were produced."""

    kind: Literal["pocforge-provenance"] = "pocforge-provenance"
    schema_version: Literal[1] = 1
    collected_at: str
    hosts: list[HostFacts] = Field(default_factory=list)
    patches: list[PatchInfo] = Field(default_factory=list)


# --------------------------------------------------------------------------- serving


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


# --------------------------------------------------------------------------- collectives


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


# --------------------------------------------------------------------------- cluster


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


# --------------------------------------------------------------------------- kernels


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


# --------------------------------------------------------------------------- training


class TrainingStep(Doc):
    step: int
    loss: float
    step_time_s: float | None = None
    tokens: int | None = None


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


# --------------------------------------------------------------------------- versions

MODELS: dict[str, type[Doc]] = {
    m.model_fields["kind"].default: m
    for m in (
        RunManifest,
        Provenance,
        ServingResult,
        CollectiveResult,
        ClusterHealth,
        KernelResults,
        TrainingResult,
    )
}


def current_version(kind: str) -> int:
    return MODELS[kind].model_fields["schema_version"].default


def _manifest_v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """v1 (first draft of the store) kept ``files`` as path -> sha256 and the kit's git
    facts flat (``git_sha``, ``git_dirty``, ``kit_version``); v2 adds sizes and open files."""
    out = dict(doc)
    out["files"] = {
        p: {"sha256": h, "bytes": 0, "open": h is None} for p, h in doc["files"].items()
    }
    out["kit"] = {
        "version": out.pop("kit_version", "unknown"),
        "git_sha": out.pop("git_sha", None),
        "git_dirty": out.pop("git_dirty", None),
    }
    out["schema_version"] = 2
    return out


# (kind, from_version) -> function returning the document at from_version + 1
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("pocforge-run", 1): _manifest_v1_to_v2,
}


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a document of a known kind to the current schema version."""
    kind = doc.get("kind")
    if kind not in MODELS:
        raise SchemaError(f"unknown result kind {kind!r}")
    version = doc.get("schema_version")
    target = current_version(kind)
    if not isinstance(version, int) or version > target:
        raise SchemaError(
            f"{kind} schema_version {version!r} is not one this kit reads (newest: {target})"
        )
    while version < target:
        step = MIGRATIONS.get((kind, version))
        if step is None:
            raise SchemaError(f"no migration for {kind} from schema_version {version}")
        doc = step(doc)
        version = doc["schema_version"]
    return doc


def parse_document(data: Any, model: type[T], where: str = "document") -> T:
    """Validate ``data`` as ``model`` after migrating it; raises :class:`SchemaError`."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: expected a JSON object")
    data = migrate({"kind": model.model_fields["kind"].default, **data})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise SchemaError(f"{where}: {loc}: {first['msg']}") from None


def load_document(path: Path, model: type[T]) -> T:
    """Read a JSON file as ``model`` (migrating older versions); raises :class:`SchemaError`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SchemaError(f"{path}: not valid JSON: {exc}") from None
    return parse_document(data, model, str(path))


def json_schemas() -> dict[str, dict[str, Any]]:
    """kind -> JSON Schema of its current version."""
    return {kind: model.model_json_schema() for kind, model in MODELS.items()}


def export_json_schemas(folder: Path) -> list[Path]:
    """Write ``<kind>.schema.json`` for every kind into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for kind, schema in json_schemas().items():
        path = folder / f"{kind}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        out.append(path)
    return out


# --------------------------------------------------------------------------- expert-parallel all-to-all

EpBenchmark = Literal[
    "deepep-intranode", "deepep-internode", "deepep-low-latency", "mori-intranode", "mori-internode"
]
EpPhase = Literal["dispatch", "combine", "dispatch+combine"]
EpLink = Literal["nvl", "xgmi", "rdma", "total", "ll"]


class EpConfig(Doc):
    """A launch configuration as the benchmark printed it (DeepEP: SMs and chunk sizes; MoRI:
    blocks and warps per block)."""

    sms: int | None = Field(None, description="DeepEP: SMs the kernel ran on (`SMs 24`).")
    nvl_chunk: int | None = Field(
        None, description="DeepEP: NVL chunk size in tokens; None with `NVL chunk default`."
    )
    rdma_chunk: int | None = Field(None, description="DeepEP internode: RDMA chunk size.")
    default: bool = Field(
        False,
        description="DeepEP intranode's `NVL chunk default`: the library's own config for the "
        "rank count (Buffer.get_dispatch_config / get_combine_config), timed beside the sweep "
        "but never chosen as its best.",
    )
    block_num: int | None = Field(None, description="MoRI: blocks (CUs) the kernel launched.")
    warp_per_block: int | None = Field(None, description="MoRI: warps per block.")


class EpRow(Doc):
    """One printed measurement (or summary) of one phase."""

    phase: EpPhase
    precision: Literal["fp8", "bf16"] | None = Field(
        None, description="Data type of the tokens moved, where the output says it."
    )
    rank: int | None = Field(
        None,
        description="The rank that printed the line (DeepEP low latency prints one per rank); "
        "None where one rank prints for all (DeepEP's tuning sweeps, local rank 0) or the "
        "numbers are over ranks (MoRI).",
    )
    round: int | None = Field(None, description="MoRI's benchmark round.")
    summary: Literal["best", "worst", "average"] | None = Field(
        None,
        description="None: one measurement. best: the tool's own pick or summary (DeepEP's "
        "`[tuning] Best ...` line: the swept config with the lowest time; MoRI's table `Best` "
        "row: highest bandwidth and lowest latency over rounds x ranks, not necessarily one "
        "sample). worst / average: MoRI's table rows.",
    )
    config: EpConfig | None = None
    gbs: dict[EpLink, float] = Field(
        default_factory=dict,
        description="Bandwidth by link in GB/s (1e9 bytes/s) as the tool computed it; see "
        "EpAllToAllResult for each tool's byte counts.",
    )
    time_us: float | None = Field(
        None,
        description="The time the bandwidths are computed from (DeepEP: the mean over its "
        "bench iterations, CUDA-event timed around the call for intranode tuning and "
        "low-latency dispatch+combine, the kernel's Kineto time for internode tuning and the "
        "low-latency phases; MoRI: the rank-mean `lat` of a round, or the table row's "
        "latency, min for Best and max for Worst).",
    )
    min_us: float | None = Field(None, description="DeepEP low latency: fastest iteration.")
    max_us: float | None = Field(None, description="DeepEP low latency: slowest iteration.")
    notify_us: float | None = Field(
        None, description="DeepEP internode: the notify kernel's time (`N + T us`: N)."
    )
    send_us: float | None = Field(
        None, description="DeepEP low latency with the receive hook: the send kernel's time."
    )
    recv_us: float | None = Field(
        None, description="DeepEP low latency with the receive hook: the receive kernel's time."
    )


class EpAllToAllResult(Doc):
    """Expert-parallel dispatch/combine benchmark output (``collectives/ep_alltoall-<benchmark>.json``).

    The numbers keep their tools' definitions (DeepEP ``tests/legacy/test_*.py`` at
    deepseek-ai/DeepEP dd758ca and the versions before it, ROCm/DeepEP printing the same
    lines; MoRI ``tests/python/ops/bench_dispatch_combine.py`` and
    ``examples/ops/dispatch_combine/test_dispatch_combine_internode.py``):

    - DeepEP intranode: ``NVL`` GB/s = bytes this rank received (``recv_x.numel() * 2`` for
      BF16, times (1 + 4/128)/2 for FP8 with its scales) / the mean CUDA-event time of
      ``bench()`` around the dispatch (combine) call. Combine sends the same bytes back.
      ROCm/DeepEP labels XGMI ``NVL`` too.
    - DeepEP internode: ``RDMA`` GB/s = ``num_rdma_token_sent * hidden * 2`` / t, where the
      token count is (token, destination node) pairs *including the local node* (MoRI's
      docs call it the algorithm figure; the bytes on the wire are (nodes-1)/nodes of it),
      ``NVL`` as intranode; t is the dispatch/combine kernel's Kineto time, the notify
      kernel's printed beside it (``N + T us``). Only local rank 0 of each node prints.
    - DeepEP low latency: ``total`` GB/s = every (token, top-k expert) copy (FP8 dispatch:
      hidden + hidden/128*4 + 16 bytes; BF16 or LogFMT combine) / time, whatever link it
      took; dispatch+combine is timed with CUDA events (avg/min/max over iterations), each
      phase alone with Kineto; every rank prints its own.
    - MoRI: ``XGMI`` GB/s = tokens this rank received x hidden x element size / the phase's
      CUDA-event time (mean over graph replays), averaged over ranks per round; ``LL`` scales
      that by max tokens x top-k / tokens received (every copy counted, as low-latency kernels
      move them); ``RDMA`` (internode) counts (token, node) pairs as DeepEP does.

    :meth:`verdict_metrics` gives the values criteria judge.
    """

    kind: Literal["pocforge-ep-alltoall"] = "pocforge-ep-alltoall"
    schema_version: Literal[1] = 1
    tool: Literal["deepep", "mori"]
    benchmark: EpBenchmark
    source_file: str | None = None
    host: str | None = Field(
        None,
        description="The node whose output this is (the cluster stage keeps one per node: a "
        "run across nodes prints on every node, each its own ranks); None for an import.",
    )
    ranks: int | None = Field(
        None,
        description="Ranks the output shows (distinct `[rank N]` of a low-latency run, the "
        "per-rank lists of MoRI's rounds); None where it does not say.",
    )
    problem: dict[str, int] = Field(
        default_factory=dict,
        description="The shape the benchmark printed (DeepEP's `[config]` line: num_tokens, "
        "hidden, num_topk, num_topk_groups).",
    )
    rows: list[EpRow]
    definitions: dict[str, str] = Field(
        default_factory=dict, description="The tool's own definitions of the numbers it reports."
    )
    notes: list[str] = Field(default_factory=list, description="What the import left out, and why.")

    @property
    def collective(self) -> str:
        """Name in ``collectives/`` (the importers' collective-result file naming):
        ``ep_alltoall-<benchmark>``, ``ep_alltoall-<benchmark>-<host>`` for a node's output."""
        return f"ep_alltoall-{self.benchmark}" + (f"-{self.host}" if self.host else "")

    def verdict_metrics(self) -> dict[str, float]:
        """``ep_<phase>.<link>_gbs`` and ``ep_<phase>.latency_us`` (phase ``dispatch``,
        ``combine``, ``dispatch_combine``; also ``ep_<phase>_<precision>.…`` where the
        precision is printed): the best over the tuned configs and rounds (highest GB/s,
        lowest time), then, where ranks print their own lines, the worst rank, since an
        all-to-all finishes with its slowest rank. MoRI's Worst and Average rows are not
        candidates; its Best row is."""
        groups: dict[str, list[EpRow]] = {}
        for row in self.rows:
            if row.summary in ("worst", "average"):
                continue
            name = "ep_" + row.phase.replace("+", "_")
            groups.setdefault(name, []).append(row)
            if row.precision:
                groups.setdefault(f"{name}_{row.precision}", []).append(row)
        out: dict[str, float] = {}
        for name, rows in groups.items():
            by_rank: dict[int | None, list[EpRow]] = {}
            for row in rows:
                by_rank.setdefault(row.rank, []).append(row)
            for link in sorted({link for row in rows for link in row.gbs}):
                best = [
                    max(r.gbs[link] for r in rs if link in r.gbs)
                    for rs in by_rank.values()
                    if any(link in r.gbs for r in rs)
                ]
                out[f"{name}.{link}_gbs"] = min(best)
            fastest = [
                min(r.time_us for r in rs if r.time_us is not None)
                for rs in by_rank.values()
                if any(r.time_us is not None for r in rs)
            ]
            if fastest:
                out[f"{name}.latency_us"] = max(fastest)
        return out


MODELS[EpAllToAllResult.model_fields["kind"].default] = EpAllToAllResult
