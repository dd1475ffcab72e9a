"""The metric registry: every number the kit reports, its unit and its definition.

One table shared by the spec (acceptance criteria must name a metric some stage will
produce), the benchmarks (summaries carry these definitions) and the dashboard.
Serving definitions follow vLLM's ``benchmark_serving`` so numbers compare across tools.

:func:`judgeable` is the one list of names an acceptance criterion may use: the spec rule
(``spec/criteria_rules.py``) refuses any other, and the judge (``results/verdicts.py``) decides
every one of them on a run that has it (``tests/results/test_verdicts.py`` checks both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Section = Literal["serving", "training", "kernels", "collectives", "parity"]

# Statistics of a per-request distribution; "p99.9" is the 99.9th percentile.
STATISTICS: tuple[str, ...] = (
    "mean",
    "median",
    "std",
    "min",
    "max",
    "p50",
    "p90",
    "p95",
    "p99",
    "p99.9",
)


@dataclass(frozen=True)
class Metric:
    name: str
    section: Section
    unit: str
    definition: str
    distribution: bool = False  # True: judged at a statistic (p99, mean, ...)
    better: Literal["lower", "higher"] = "higher"
    derived: bool = False  # computed from other metrics, labelled as such in reports
    judged: bool = True  # False: reported for reading only; no criterion may name it
    # Measured only on a GPU: a kernel's time (the CPU runs the Triton interpreter) or a
    # utilisation of the GPU's peak; a criterion on it is refused for a `cpu` cluster.
    needs_gpu: bool = False


_SERVING = [
    Metric(
        "ttft_ms",
        "serving",
        "ms",
        "Time to first token: request sent to first non-empty streamed token.",
        True,
        "lower",
    ),
    Metric(
        "tpot_ms",
        "serving",
        "ms",
        "Time per output token after the first: (E2EL - TTFT) / (output_tokens - 1); requests with one output token are excluded.",
        True,
        "lower",
    ),
    Metric(
        "itl_ms",
        "serving",
        "ms",
        "Inter-token latency: gap between consecutive streamed chunks carrying tokens, over all chunks of all requests.",
        True,
        "lower",
    ),
    Metric(
        "e2el_ms",
        "serving",
        "ms",
        "End-to-end latency: request sent to last byte of the response.",
        True,
        "lower",
    ),
    Metric("request_throughput", "serving", "req/s", "Completed requests / benchmark duration."),
    Metric(
        "output_throughput",
        "serving",
        "tok/s",
        "Output tokens of completed requests / benchmark duration.",
    ),
    Metric(
        "total_token_throughput",
        "serving",
        "tok/s",
        "(Input + output tokens of completed requests) / benchmark duration.",
    ),
    Metric(
        "goodput",
        "serving",
        "req/s",
        "Completed requests meeting every SLO of the workload / benchmark duration.",
    ),
    Metric(
        "interactivity",
        "serving",
        "tok/s/user",
        "1000 / TPOT (ms): the token rate one user sees.",
        True,
        "higher",
        derived=True,
    ),
    Metric(
        "output_throughput_per_gpu",
        "serving",
        "tok/s/GPU",
        "Output throughput / GPUs serving the workload.",
        derived=True,
    ),
    Metric("error_rate", "serving", "fraction", "Failed requests / requests sent.", better="lower"),
    Metric(
        "ttft_first_turn_ms",
        "serving",
        "ms",
        "multi_turn / doc_qa workloads: TTFT of the first turn or round (nothing of the "
        "conversation or document cached yet).",
        True,
        "lower",
    ),
    Metric(
        "ttft_later_turns_ms",
        "serving",
        "ms",
        "multi_turn / doc_qa workloads: TTFT of every later turn or round (the history or "
        "document may come from the prefix cache).",
        True,
        "lower",
    ),
    # From the servers' own counters around each repeat (pocforge.bench.promscrape), so a
    # figure no client can see: how much prompt the caches and the P/D transfer served.
    Metric(
        "prefix_hit_rate",
        "serving",
        "fraction",
        "Prompt tokens found in the servers' prefix cache / prompt tokens looked up, from "
        "their counters (vLLM prefix_cache_hits / prefix_cache_queries, SGLang cached_tokens "
        "/ prompt_tokens) over the repeat.",
    ),
    Metric(
        "kv_transfer_share",
        "serving",
        "fraction",
        "Disaggregated: prompt tokens the decode pool took from KV transferred by the "
        "prefill pool / prompt tokens it admitted (vLLM prompt_tokens_by_source).",
    ),
    Metric(
        "kv_transfer_failures",
        "serving",
        "requests",
        "Disaggregated: requests whose prefill or decode step failed at the kit's router.",
        better="lower",
    ),
    Metric(
        "kv_transfer_mb_per_request",
        "serving",
        "MB",
        "Disaggregated with NIXL: KV bytes one request's transfer moved from prefill to "
        "decode (vLLM's nixl_bytes_transferred, sum / count) / 10^6.",
        better="lower",
    ),
    Metric(
        "prefill_ms",
        "serving",
        "ms",
        "Disaggregated: mean time of the prefill step at the router (request to the prefill "
        "pool's one-token answer), the first part of TTFT.",
        better="lower",
    ),
    Metric(
        "transfer_decode_ms",
        "serving",
        "ms",
        "Disaggregated: mean time from the router's decode request to its first byte (the "
        "KV transfer and the first decode step), the rest of TTFT.",
        better="lower",
    ),
    # Energy (pocforge.telemetry): over each repeat's measured window, of the devices that
    # served it: the GPUs, or on a `cpu` cluster the CPU packages (RAPL). Not needs_gpu:
    # RAPL measures a CPU POC too; where a node has no power source at all the figures are
    # absent and a criterion on them is inconclusive, never estimated.
    Metric(
        "avg_power_w",
        "serving",
        "W",
        "Energy of the devices serving the workload (GPUs; on a cpu cluster the CPU "
        "packages, from RAPL) over the measured window / its length: their summed average "
        "power.",
        better="lower",
    ),
    Metric(
        "joules_per_token",
        "serving",
        "J/tok",
        "Energy of the devices serving the workload over the measured window (their energy "
        "counter where the telemetry has one, else the trapezoid integral of power) / output "
        "tokens of completed requests.",
        better="lower",
        derived=True,
    ),
    Metric(
        "tokens_per_s_per_kw",
        "serving",
        "tok/s/kW",
        "Output throughput / (avg_power_w / 1000).",
        derived=True,
    ),
    Metric(
        "usd_per_million_tokens",
        "serving",
        "$/Mtok",
        "GPUs × window hours × GPU-hour price / (output tokens / 10^6); the price is "
        "compare.price_per_gpu_hour, else the catalog's for cluster.gpu on compare.price_basis.",
        better="lower",
        derived=True,
    ),
]
_TRAINING = [
    Metric(
        "tokens_per_s_per_gpu",
        "training",
        "tok/s/GPU",
        "Tokens trained per second (after warm-up steps) / world size.",
    ),
    Metric(
        "tflops_per_gpu",
        "training",
        "TFLOP/s",
        "Model FLOPs per step (6 x params x tokens + attention) / step time / world size.",
    ),
    Metric(
        "mfu",
        "training",
        "fraction",
        "Model FLOPs utilisation: tflops_per_gpu / the GPU's dense peak for the training dtype.",
        derived=True,
        needs_gpu=True,
    ),
    Metric(
        "peak_memory_gb",
        "training",
        "GB",
        "Peak device memory allocated on any rank.",
        better="lower",
    ),
    Metric("final_loss", "training", "nats", "Mean loss over the last steps.", better="lower"),
]
_KERNELS = [
    Metric(
        "pct_roofline",
        "kernels",
        "%",
        "Achieved rate / the binding roofline (HBM bandwidth or dense matrix peak).",
        needs_gpu=True,
    ),
    Metric(
        "speedup_vs_reference",
        "kernels",
        "x",
        "Torch reference time / kit kernel time.",
        derived=True,
        needs_gpu=True,
    ),
    Metric(
        "max_rel_error",
        "kernels",
        "fraction",
        "Largest relative error against the float64 reference.",
        better="lower",
    ),
]
_COLLECTIVES = [
    Metric(
        "busbw_gbs",
        "collectives",
        "GB/s",
        "Bus bandwidth at the largest message size (nccl-tests definition).",
    ),
    Metric(
        "pct_reference",
        "collectives",
        "%",
        "100 × bus bandwidth at the largest message size / the platform's reference bus "
        "bandwidth for the collective and scope (within a node, across nodes) that the "
        "cluster stage compared against (cluster/data/collectives_reference.yaml); the worst "
        "run decides.",
    ),
    Metric(
        "wrong", "collectives", "count", "Elements with wrong results (#wrong).", better="lower"
    ),
]
# The expert-parallel dispatch/combine benchmarks (DeepEP's tests, ROCm/DeepEP's, MoRI's),
# judged as ``collectives.ep_<phase>[_fp8|_bf16].<name>`` (EpAllToAllResult.verdict_metrics:
# each output's best tuned config or round, then its slowest rank); every output of the run
# that prints the number counts and the worst decides. The numbers keep the tools' own
# definitions (results/schema.py, EpAllToAllResult).
_EP_ALLTOALL = [
    Metric(
        "rdma_gbs",
        "collectives",
        "GB/s",
        "Dispatch/combine across nodes (DeepEP tests/test_internode.py, MoRI's internode "
        "test): (token, destination node) pairs, the local node included, × hidden × bytes "
        "per element / the phase's time; an algorithm figure, the wire carries (nodes-1)/nodes "
        "of it.",
        needs_gpu=True,
    ),
    Metric(
        "nvl_gbs",
        "collectives",
        "GB/s",
        "DeepEP's NVL figure (test_intranode.py, test_internode.py): bytes a rank received "
        "(2 per BF16 element; FP8 with its scales) / the phase's time; ROCm/DeepEP prints its "
        "XGMI figure under the same label.",
        needs_gpu=True,
    ),
    Metric(
        "xgmi_gbs",
        "collectives",
        "GB/s",
        "MoRI's XGMI figure: tokens a rank received × hidden × element size / the phase's "
        "CUDA-event time, a round's mean over ranks (across nodes: its Best row).",
        needs_gpu=True,
    ),
    Metric(
        "ll_gbs",
        "collectives",
        "GB/s",
        "MoRI's LL figure: the XGMI figure × max tokens × top-k / tokens received, every "
        "(token, expert) copy counted as low-latency kernels move them.",
        needs_gpu=True,
    ),
    Metric(
        "total_gbs",
        "collectives",
        "GB/s",
        "DeepEP low latency (tests/test_low_latency.py): the bytes of every (token, top-k "
        "expert) copy (FP8 dispatch: hidden + hidden/128 × 4 + 16; BF16 combine) / the "
        "phase's time, whatever link carried them.",
        needs_gpu=True,
    ),
    Metric(
        "latency_us",
        "collectives",
        "µs",
        "The phase's time as the benchmark prints it: DeepEP's mean over its bench "
        "iterations (CUDA events around the call, or the kernel's Kineto time across nodes "
        "and for low-latency phases), MoRI's rank-mean time of a round or its Best row.",
        better="lower",
        needs_gpu=True,
    ),
]
_COLLECTIVES += _EP_ALLTOALL
# The collectives metrics that name a dispatch/combine phase (``collectives.ep_dispatch.…``);
# the others name an nccl-tests collective (``collectives.all_reduce.…``).
EP_ALLTOALL_METRICS: frozenset[str] = frozenset(m.name for m in _EP_ALLTOALL)

# The parity gate (pocforge.quality.parity); accuracy metrics are whatever the task's
# lm-eval YAML reports (accuracy.<task>.<metric>), so they are not listed here.
_PARITY = [
    Metric(
        "token_agreement",
        "parity",
        "fraction",
        "Share of the parity prompts whose greedy continuations are token for token identical with the baseline's.",
    ),
    Metric(
        "first_divergence",
        "parity",
        "tokens",
        "Earliest token position (0-based) where a continuation differs from the baseline's.",
    ),
    Metric(
        "max_logprob_diff",
        "parity",
        "nats",
        "Largest |log p_baseline - log p_candidate| over the tokens both top-k lists hold, at positions up to the first divergence.",
        better="lower",
    ),
    Metric("mean_logprob_diff", "parity", "nats", "Mean of those differences.", better="lower"),
    Metric(
        "kl",
        "parity",
        "nats",
        "Mean KL(baseline ‖ candidate) of the next-token distributions on the tokens both top-k lists hold.",
        better="lower",
    ),
]

METRICS: dict[tuple[str, str], Metric] = {
    (m.section, m.name): m for m in _SERVING + _TRAINING + _KERNELS + _COLLECTIVES + _PARITY
}


def metric(section: str, name: str) -> Metric | None:
    return METRICS.get((section, name))


def metric_names(section: str) -> list[str]:
    return [name for (sec, name) in METRICS if sec == section]


def judgeable(section: str) -> list[str]:
    """Names of ``section`` an acceptance criterion may use (see the module docstring)."""
    return [m.name for m in METRICS.values() if m.section == section and m.judged]
