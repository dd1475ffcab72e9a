"""The expert-parallel dispatch/combine benchmark's result (DeepEP, MoRI), in its tools'
own definitions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pocforge.results.base import Doc

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
