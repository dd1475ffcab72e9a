"""The GPU kernels by time, from the summary a vendor's profiler wrote, each sorted into where
the time went (attention, GEMM, MoE, communication, norms and elementwise, other).

Read as the tools write them (real captures in ``tests/data/profilers/``):

- Nsight Systems, ``nsys stats --report cuda_gpu_kern_sum``: columns ``Time (%)``,
  ``Total Time (ns)``, ``Instances``, ``Avg (ns)``, ``Med (ns)``, ``Min (ns)``,
  ``Max (ns)``, ``StdDev (ns)``, ``Name``; with ``--format csv`` a CSV, else a text table
  whose columns are the dash runs of the rule under the header (numbers right-aligned, the
  name last and cut at 100 characters with ``…``; some versions group digits with commas).
- rocprofv3, ``--kernel-trace --stats``: ``<prefix>_kernel_stats.csv``, columns ``Name``,
  ``Calls``, ``TotalDurationNs``, ``AverageNs``, ``Percentage``, ``MinNs``, ``MaxNs``,
  ``StdDev``; legacy rocprof's ``--stats`` ``results.stats.csv``, its first five.

A kernel's share is the tool's own percentage (of all kernel time, also where a file was cut
to its top rows); the categories are matched on the kernel's name (:data:`CATEGORIES`).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.frameworks.profilers import KERNEL_SUMMARY_PATTERNS

# Files a profiled point's folder may hold: what the tools name them
PATTERNS = KERNEL_SUMMARY_PATTERNS
TOP = 15
# first match wins, in this order: a FlashAttention kernel is a CUTLASS kernel too, and a
# grouped (MoE) GEMM a GEMM. Names as the libraries spell them: NCCL/RCCL, vLLM's and
# SGLang's custom all-reduce, DeepEP; fused-MoE kernels (vLLM, SGLang, TensorRT-LLM, AITER)
# and CUTLASS grouped GEMMs; FlashAttention, FlashInfer, FMHA, paged and MLA attention, the
# KV-cache writes; cuBLAS(Lt), nvjet, CUTLASS, hipBLASLt/Tensile (Cijk_), MIOpen igemm, CK.
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(
            r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device"
            r"|deep_?ep|mscclpp|oneshot|twoshot|one_shot|two_shot|sendrecv",
            re.I,
        ),
    ),
    (
        "moe",
        re.compile(r"moe|expert|topk_?gating|GroupProblemShape|grouped_?gemm|group_gemm", re.I),
    ),
    (
        "attention",
        re.compile(
            r"flash|fmha|attn|attention|paged|flashinfer|mla_|_mla|reshape_and_cache"
            r"|rotary|decode_kernel|prefill_kernel",
            re.I,
        ),
    ),
    (
        "gemm",
        re.compile(
            r"gemm|gemv|cublas|nvjet|cutlass|Cijk_|matmul|mul_mat|wmma|mfma|ck_tile|xdlops"
            r"|kernel_gemm",
            re.I,
        ),
    ),
    (
        "norm_elementwise",
        re.compile(
            r"norm|silu|gelu|act_and_mul|softmax|soft_max|elementwise|copy|fill|reduce"
            r"|index|gather|scatter|cat_|cpy|convert|quantize|unary|binary|transpose",
            re.I,
        ),
    ),
)
OTHER = "other"


@dataclass
class Kernel:
    name: str
    calls: int
    total_ns: float
    avg_ns: float
    share: float  # of all kernel time the tool saw, 0..1
    category: str


@dataclass
class KernelTable:
    """Every kernel of one summary file, by total time (longest first)."""

    tool: str  # nsys, rocprofv3, rocprof
    kernels: list[Kernel] = field(default_factory=list)

    @property
    def total_ns(self) -> float:
        return sum(k.total_ns for k in self.kernels)

    def top(self, n: int = TOP) -> list[Kernel]:
        return self.kernels[:n]

    def by_category(self) -> list[tuple[str, float]]:
        """(category, share of the kernel time) for each category present, largest first."""
        shares: dict[str, float] = {}
        for k in self.kernels:
            shares[k.category] = shares.get(k.category, 0.0) + k.share
        return sorted(shares.items(), key=lambda item: -item[1])


class KernelStatsError(ValueError):
    """Text that is no kernel summary the kit reads."""


def category(name: str) -> str:
    """Where a kernel's time goes, from its name (:data:`CATEGORIES`)."""
    for label, pattern in CATEGORIES:
        if pattern.search(name):
            return label
    return OTHER


def _number(cell: str) -> float:
    return float(cell.replace(",", "").strip())


# the tool's header -> (name, calls, total, average, percentage) columns
_NSYS = ("Name", "Instances", "Total Time (ns)", "Avg (ns)", "Time (%)")
_ROCPROF = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage")


def _table(tool: str, columns: tuple[str, ...], rows: list[dict[str, str]]) -> KernelTable:
    name, calls, total, avg, pct = columns
    kernels = []
    for row in rows:
        try:
            kernels.append(
                Kernel(
                    name=row[name].strip(),
                    calls=int(_number(row[calls])),
                    total_ns=_number(row[total]),
                    avg_ns=_number(row[avg]),
                    share=_number(row[pct]) / 100.0,
                    category=category(row[name]),
                )
            )
        except (KeyError, ValueError, AttributeError) as exc:
            raise KernelStatsError(f"a {tool} row that does not read: {row} ({exc})") from None
    kernels.sort(key=lambda k: -k.total_ns)
    return KernelTable(tool, kernels)


def _csv(lines: list[str]) -> KernelTable:
    header = next(i for i, line in enumerate(lines) if line.strip())
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[header:]))))
    fields = set(rows[0]) if rows else set(next(csv.reader([lines[header]])))
    if set(_NSYS) <= fields:
        return _table("nsys", _NSYS, rows)
    if set(_ROCPROF) <= fields:
        tool = "rocprofv3" if "MinNs" in fields else "rocprof"
        return _table(tool, _ROCPROF, rows)
    raise KernelStatsError(f"a CSV with columns {sorted(fields)}: not nsys's nor rocprof's")


def _nsys_text(lines: list[str]) -> KernelTable:
    """nsys's column format: the rule under the header gives each column's span."""
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("Time (%)"))
    header, rule = lines[at], lines[at + 1]
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    if len(spans) < len(_NSYS):
        raise KernelStatsError("an nsys table whose rule does not mark its columns")
    spans[-1] = (spans[-1][0], None)  # the name runs to the end of its line

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in spans]

    names = cells(header)
    rows = []
    for line in lines[at + 2 :]:
        if not line.strip():
            break
        rows.append(dict(zip(names, cells(line), strict=True)))
    return _table("nsys", _NSYS, rows)


def parse(text: str) -> KernelTable:
    """The kernels of an nsys ``cuda_gpu_kern_sum`` (CSV or text) or rocprof(v3) stats CSV."""
    lines = text.splitlines()
    if any(line.strip().startswith("Time (%)") and "," not in line for line in lines):
        return _nsys_text(lines)
    # an nsys CSV printed to the terminal comes after its "Processing ..." lines
    start = next(
        (i for i, line in enumerate(lines) if line.lstrip('"').startswith(("Time (%)", "Name"))),
        None,
    )
    if start is None:
        raise KernelStatsError("no header of nsys's cuda_gpu_kern_sum nor of rocprof's stats")
    return _csv(lines[start:])


def read(path: Path) -> KernelTable | None:
    """:func:`parse` of a file; None for one that cannot be read or is no kernel summary."""
    try:
        return parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, KernelStatsError):
        return None
