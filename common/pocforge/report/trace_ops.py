"""The table of operations by time, summed by the kit from a torch profiler's Chrome trace,
for a trace that came without the framework's own table: SGLang writes none, and vLLM's
worker writes none when torch's ``key_averages`` raises on stop (a ``UnicodeDecodeError``
from the Python tracer's names, pytorch/kineto#988). On a GPU run the trace's kernels give
the GPU kernels by time too, in :mod:`pocforge.report.kernel_stats`'s table.

Summed as torch sums its own table (``torch/autograd/profiler_util.py``): an event's self
time is its duration less that of the events directly inside it on the same thread, nested
by torch's rule (``_populate_cpu_children``: a child lies wholly inside its parent), and a
call whose one child has its name is one call (``_remove_dup_nodes``). The
events are the trace's CPU-side complete events: ``cpu_op`` (aten and framework ops),
``user_annotation`` (``record_function`` scopes), ``python_function`` (the Python tracer's
frames, which torch's table lists too when stacks are on) and ``cuda_runtime`` /
``cuda_driver`` (launch calls, HIP's too). Kernels are the ``kernel`` events of the
device's rows. Times are written as torch writes them (``_format_time``: ``us``, ``ms``,
``s`` to three places) so the page shows one kind of table whichever made it. Checked
against torch's own table of the same profile, and vLLM's (tests/report/test_trace_ops.py,
tests/faults/test_kill_run.py).

Read here, not with a trace library: HolisticTraceAnalysis wants a GPU trace and pandas,
Perfetto's trace processor a binary downloaded at first use; the sum is a sort and a stack.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from pocforge.report import kernel_stats
from pocforge.report.ops_table import NAME, OpsTable

CPU_CATEGORIES = frozenset(
    {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}
)
KERNEL_CATEGORY = "kernel"
TOOL = "the torch profiler's trace"  # the KernelTable's tool: summed by the kit
# a compressed trace past this is left to Perfetto: a GPU serving point's traces reach
# hundreds of MB of JSON, more than the dashboard's build should hold in memory at once
MAX_BYTES = 48 * 1000**2
TOTAL_LABEL = "Self CPU time total"


class TraceError(ValueError):
    """A file that is no torch profiler trace the kit reads (or one too large to sum)."""


@dataclass
class TraceSummary:
    ops: OpsTable
    kernels: kernel_stats.KernelTable | None  # None: the trace holds no GPU kernel


def format_time(us: float) -> str:
    """A duration as torch's table writes it (``profiler_util._format_time``)."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _events(path: Path) -> list[dict]:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise TraceError(
                f"{path.name}: {size / 1e6:.0f} MB compressed, past the "
                f"{MAX_BYTES / 1e6:.0f} MB the dashboard sums; open it in Perfetto"
            )
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        # exact decimals: torch writes µs to the ns (``1764676000000.123``), past what a
        # float keeps, and a child 1 ns past its parent's end is no child (torch's rule)
        data = json.loads(raw, parse_float=Decimal)
    except TraceError:
        raise
    except (OSError, EOFError, zlib.error, ValueError) as exc:  # a torn .gz, not JSON
        raise TraceError(f"{path.name}: not a readable trace ({exc})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path.name}: no traceEvents list")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _ns(value: object) -> int:
    """A trace time in µs (an int, or a decimal to the ns) in whole ns."""
    return int(Decimal(value) * 1000) if isinstance(value, int | Decimal) else 0


def _self_times(events: list[dict]) -> dict[str, list[int]]:
    """name -> [self ns, total ns, calls] over the CPU-side events, per thread nested by
    time as torch nests them (a child lies wholly inside its parent)."""
    by_thread: dict[tuple, list[tuple[int, int, str]]] = {}
    for e in events:
        if e.get("cat") in CPU_CATEGORIES and "ts" in e:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(
                (_ns(e["ts"]), _ns(e.get("dur")), str(e.get("name", "")))
            )
    sums: dict[str, list[int]] = {}
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))  # a parent before the children it starts with
        roots: list[list] = []
        stack: list[list] = []  # [end, name, ns, children]
        for start, dur, name in spans:
            # torch's rule (_populate_cpu_children): a span not wholly inside the top of
            # the stack ends that parent; one that overlaps it only in part is no child
            while stack and (start >= stack[-1][0] or start + dur > stack[-1][0]):
                stack.pop()
            span = [start + dur, name, dur, []]
            (stack[-1][3] if stack else roots).append(span)
            stack.append(span)
        _add(roots, sums)
    return sums


def _add(roots: list[list], sums: dict[str, list[int]]) -> None:
    """Each span of the trees into ``sums``, after torch's ``_remove_dup_nodes``: a span
    whose one child has its name (``aten::sum`` calling ``aten::sum``) is one call, that
    child's children its own."""
    todo = list(roots)
    while todo:  # not recursive: the Python tracer's frames nest deep
        _, name, dur, children = todo.pop()
        while len(children) == 1 and children[0][1] == name:
            children = children[0][3]
        entry = sums.setdefault(name, [0, 0, 0])
        # not clamped, as torch does not: the frame the profile started in ends up below zero
        # (its trace span is cut to the profile), and the total is torch's only with it
        entry[0] += dur - sum(child[2] for child in children)
        entry[1] += dur
        entry[2] += 1
        todo += children


def _ops(events: list[dict], top: int) -> OpsTable:
    sums = _self_times(events)
    total = sum(v[0] for v in sums.values())
    table = OpsTable(
        columns=["Self CPU %", "Self CPU", "CPU total", "# of Calls"],
        totals=[(TOTAL_LABEL, format_time(total / 1e3))],
    )
    for name, (self_ns, total_ns, calls) in sorted(sums.items(), key=lambda kv: -kv[1][0])[:top]:
        table.rows.append(
            {
                NAME: name,
                "Self CPU %": f"{100 * self_ns / total:.2f}%" if total else "NaN",
                "Self CPU": format_time(self_ns / 1e3),
                "CPU total": format_time(total_ns / 1e3),
                "# of Calls": str(calls),
            }
        )
    return table


def _kernels(events: list[dict]) -> kernel_stats.KernelTable | None:
    sums: dict[str, list[int]] = {}
    for e in events:
        if e.get("cat") == KERNEL_CATEGORY:
            entry = sums.setdefault(str(e.get("name", "")), [0, 0])
            entry[0] += _ns(e.get("dur"))  # in ns, as the tools' tables
            entry[1] += 1
    if not sums:
        return None
    total = sum(ns for ns, _ in sums.values())
    kernels = [
        kernel_stats.Kernel(
            name=name,
            calls=int(calls),
            total_ns=ns,
            avg_ns=ns / calls,
            share=ns / total if total else 0.0,
            category=kernel_stats.category(name),
        )
        for name, (ns, calls) in sums.items()
    ]
    kernels.sort(key=lambda k: -k.total_ns)
    return kernel_stats.KernelTable(TOOL, kernels)


def summarize(path: Path, top: int) -> TraceSummary:
    """The first ``top`` operations by self CPU time of a Chrome trace (``.json`` or
    ``.json.gz``) and its GPU kernels by time; :class:`TraceError` for a file that does not
    read as one."""
    events = _events(Path(path))
    return TraceSummary(ops=_ops(events, top), kernels=_kernels(events))
