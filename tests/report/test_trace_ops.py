"""The table the kit sums from a torch profiler trace that came without the framework's own
(:mod:`pocforge.report.trace_ops`): checked against torch's own table of the same profile,
taken here, and on a real CUDA trace (tests/data/README.md) for the kernels and the nesting.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from pocforge.report import trace_ops
from pocforge.report.ops_table import parse_table
from pocforge.report.profiles import points
from pocforge.results.serving import load_workload
from tests.report.conftest import DATA

PROFILE = Path(__file__).resolve().parents[1] / "data" / "report" / "profile"
GPU_TRACE = PROFILE / "hta-backward_thread-a100.json"
CUTLASS = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"


@pytest.fixture(scope="module")
def torch_profile(tmp_path_factory) -> tuple[Path, str]:
    """A real torch.profiler run with the Python tracer (as the frameworks run it), a
    forward and backward of a small MLP for 8 steps: its Chrome trace, and torch's own
    table of it (every row), sorted by self CPU time as vLLM sorts it."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64), torch.nn.LayerNorm(64)
    )
    x = torch.randn(32, 64)
    model(x).sum().backward()  # first-call imports and allocations outside the profile
    folder = tmp_path_factory.mktemp("trace")
    for attempt in range(3):
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            for _ in range(8):
                with record_function("step"):
                    model(x).sum().backward()
        try:  # torch's table first and once: the Python tracer's names can go stale after
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)
        except UnicodeDecodeError:  # pytorch/kineto#988, the error vLLM's workers log too
            continue
        trace = folder / f"rank0.{attempt}.pt.trace.json.gz"
        plain = trace.with_suffix("")
        prof.export_chrome_trace(str(plain))
        exported = plain.read_bytes()
        plain.unlink()
        # the same stale name decoded without error: a row of torch's table that its own
        # trace of the profile does not have, such as 'torch/profiler/_cupti_monitor.py(0):'
        # (1 profile in 6 here); torch's table is then no reference
        named = {e.get("name") for e in json.loads(exported)["traceEvents"]}
        rows = [r["Name"] for r in parse_table(table, 10_000).rows]
        if all(n in named for n in rows if not n.endswith("...")):
            trace.write_bytes(gzip.compress(exported))
            break
    else:
        pytest.fail(
            "torch's table of 3 profiles in a row was no reference (UnicodeDecodeError, or a "
            "name its own trace has not)"
        )
    return trace, table


class _Printed(float):
    """A figure as torch prints it (``2.347ms``, ``2.62%``, ``8``), equal to another within
    one unit of the last digit printed: torch adds floats in its own order, so a sum on a
    rounding boundary can print one digit apart from the same sum taken in another order
    (seen on 2026-12-07: 2.348ms here, 2.347ms in torch's table)."""

    unit: float = 0.0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Printed):
            return NotImplemented
        return abs(float(self) - float(other)) <= max(self.unit, other.unit) * 1.0001

    __hash__ = float.__hash__


_SCALE = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "%": 1.0}


def _value(text: str) -> _Printed:
    """``'531.847us'`` -> 531.847 (us), its last printed digit's unit 0.001 us."""
    number, unit = re.fullmatch(r"([-\d.]+)\s*([a-z%]*)", text.strip()).groups()
    scale = _SCALE.get(unit, 1.0)
    decimals = len(number.partition(".")[2])
    printed = _Printed(float(number) * scale)
    printed.unit = 10.0**-decimals * scale if unit else 0.0
    return printed


def test_the_sum_is_torchs_own_table(torch_profile) -> None:
    """Every one of the first ten rows as torch's table has it (name, share, self and total
    CPU time, calls: same order, same figures), and the same total."""
    trace, table = torch_profile
    theirs = parse_table(table)
    mine = trace_ops.summarize(trace, 10).ops
    assert mine.columns == theirs.columns == ["Self CPU %", "Self CPU", "CPU total", "# of Calls"]
    keys = ("Self CPU %", "Self CPU", "CPU total", "# of Calls")
    assert [[_value(r[k]) for k in keys] for r in mine.rows] == [
        [_value(t[k]) for k in keys] for t in theirs.rows
    ]
    for r, t in zip(mine.rows, theirs.rows, strict=True):  # torch cuts a long name ("...")
        assert r["Name"].startswith(t["Name"].removesuffix("...")), (r["Name"], t["Name"])
    assert any(r["Name"] == "aten::addmm" for r in mine.rows)
    ((label, total),) = mine.totals
    assert label == theirs.totals[0][0] == "Self CPU time total"
    assert _value(total) == _value(theirs.totals[0][1])
    assert trace_ops.summarize(trace, 10).kernels is None  # a CPU run: no kernel


def test_every_operation_is_summed_as_torch_sums_it(torch_profile) -> None:
    """Every row of torch's table, not only its top: the same calls, self and total time per
    operation; ``aten::sum`` calls ``aten::sum`` in the backward's bias gradients, and torch
    counts such a call once (``_remove_dup_nodes``)."""
    trace, table = torch_profile
    keys = ("Self CPU", "CPU total", "# of Calls")
    theirs = {r["Name"]: [r[k] for k in keys] for r in parse_table(table, 10_000).rows}
    mine = {r["Name"]: [r[k] for k in keys] for r in trace_ops.summarize(trace, 10_000).ops.rows}
    named = [n for n in theirs if not n.endswith("...")]  # torch cuts long names
    assert len(named) > 20 and "aten::sum" in named
    assert {n: [_value(v) for v in mine.get(n, [])] for n in named} == {
        n: [_value(v) for v in theirs[n]] for n in named
    }


def test_a_cuda_trace_gives_its_kernels_and_torchs_nesting() -> None:
    """The real A100 trace: the CUTLASS GEMM is the one kernel (45 µs, all the kernel
    time, a GEMM); each CPU event's self time is its duration less what runs inside it on
    its thread (evaluate_function ⊃ AddmmBackward0 ⊃ aten::mm ⊃ cudaLaunchKernel), the
    step's less the backward annotation; the kernel row is no CPU operation."""
    summary = trace_ops.summarize(GPU_TRACE, 10)
    (kernel,) = summary.kernels.kernels
    assert (kernel.name, kernel.calls, kernel.total_ns, kernel.share) == (CUTLASS, 1, 45_000, 1.0)
    assert kernel.category == "gemm" and summary.kernels.tool == trace_ops.TOOL
    rows = {r["Name"]: (r["Self CPU"], r["CPU total"], r["# of Calls"]) for r in summary.ops.rows}
    assert rows == {
        "ProfilerStep#552": ("305.463ms", "413.451ms", "1"),  # 413451 - 107988
        "## backward ##": ("107.988ms", "107.988ms", "1"),
        "autograd::engine::evaluate_function: AddmmBackward0": ("43.000us", "145.000us", "1"),
        "AddmmBackward0": ("44.000us", "102.000us", "1"),  # 102 - 58
        "aten::mm": ("48.000us", "58.000us", "1"),  # 58 - 10
        "cudaLaunchKernel": ("10.000us", "10.000us", "1"),
    }
    assert [r["Name"] for r in summary.ops.rows][:2] == ["ProfilerStep#552", "## backward ##"]
    assert summary.ops.totals == [("Self CPU time total", "413.596ms")]  # every self time


@pytest.mark.parametrize(
    "body",
    [b"", b"\x1f\x8b\x08\x00 torn", b'{"traceEvents": 3}', b"[1, 2"],
    ids=["empty", "torn-gzip", "no-event-list", "cut-json"],
)
def test_a_file_that_is_no_trace_is_refused_naming_it(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / ("t.pt.trace.json.gz" if body.startswith(b"\x1f") else "t.pt.trace.json")
    path.write_bytes(body)
    with pytest.raises(trace_ops.TraceError, match=path.name):
        trace_ops.summarize(path, 10)


def test_a_trace_past_the_limit_is_left_to_perfetto(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "big.pt.trace.json"
    shutil.copy(GPU_TRACE, path)
    monkeypatch.setattr(trace_ops, "MAX_BYTES", 1000)
    with pytest.raises(trace_ops.TraceError, match="open it in Perfetto") as refused:
        trace_ops.summarize(path, 10)
    assert str(refused.value).startswith("big.pt.trace.json: 0 MB compressed, past the 0 MB")


def test_a_point_sums_only_the_traces_without_their_table(torch_profile, tmp_path: Path) -> None:
    """vLLM's worker whose table was lost and SGLang's trace (no table ever) get the kit's
    sum, marked as such; a trace beside its process's table keeps the framework's table
    only; a torn trace gets an empty table with its reason; the GPU trace adds its kernels."""
    trace, _ = torch_profile
    folder = tmp_path / "serving" / "chat"
    shutil.copytree(DATA / "pocforge-sweep-a", folder)
    profile = folder / "profile-c2"
    profile.mkdir()
    shutil.copy(trace, profile / "rank0.17.pt.trace.json.gz")  # its table lost
    shutil.copy(PROFILE / "rank0.profiler_out.txt", profile / "vm_7.async_llm.profiler_out.txt")
    shutil.copy(trace, profile / "vm_7.async_llm.18.pt.trace.json.gz")  # its table kept
    shutil.copy(GPU_TRACE, profile / "1764-TP-0.trace.json")  # SGLang's name
    (profile / "1765-TP-1.trace.json.gz").write_bytes(b"\x1f\x8b torn")
    (entry,) = points(load_workload(folder), folder, tmp_path)
    tables = {t["name"]: t for t in entry["tables"]}
    assert set(tables) == {
        "vm_7.async_llm.profiler_out.txt",
        "rank0.17.pt.trace.json.gz",
        "1764-TP-0.trace.json",
        "1765-TP-1.trace.json.gz",
    }
    assert not tables["vm_7.async_llm.profiler_out.txt"].get("summed")
    assert all(tables[n]["summed"] for n in tables if "trace" in n)
    assert "aten::addmm" in [r["Name"] for r in tables["rank0.17.pt.trace.json.gz"]["table"].rows]
    assert tables["1764-TP-0.trace.json"]["table"].rows[0]["Name"] == "ProfilerStep#552"
    torn = tables["1765-TP-1.trace.json.gz"]
    assert torn["table"].rows == [] and "not a readable trace" in torn["error"]
    (kernels,) = entry["kernels"]
    assert kernels["name"] == "1764-TP-0.trace.json" and kernels["rows"][0].name == CUTLASS
    assert kernels["categories"] == [("gemm", 1.0)]


def test_a_covered_trace_is_read_for_kernels_only_where_its_table_timed_a_device(
    torch_profile, tmp_path: Path, monkeypatch
) -> None:
    """A CPU run's trace beside its table (only ``Self CPU time total``) is not read at all:
    the page shows its table and nothing of the trace; one beside a CUDA run's table (both
    totals) is read for its kernels, and its table stays the framework's."""
    read: list[str] = []
    summarize = trace_ops.summarize

    def spy(path: Path, top: int) -> trace_ops.TraceSummary:
        read.append(path.name)
        return summarize(path, top)

    monkeypatch.setattr(trace_ops, "summarize", spy)
    trace, _ = torch_profile
    folder = tmp_path / "serving" / "chat"
    shutil.copytree(DATA / "pocforge-sweep-a", folder)
    cpu, gpu = folder / "profile-c1", folder / "profile-c2"
    cpu.mkdir(), gpu.mkdir()
    shutil.copy(PROFILE / "rank0.profiler_out.txt", cpu / "rank0.profiler_out.txt")
    shutil.copy(trace, cpu / "rank0.3.pt.trace.json.gz")
    shutil.copy(PROFILE / "kernelheim_torch_square_cuda.txt", gpu / "rank0.profiler_out.txt")
    shutil.copy(GPU_TRACE, gpu / "rank0.4.pt.trace.json")
    entries = {e["id"]: e for e in points(load_workload(folder), folder, tmp_path)}
    assert read == ["rank0.4.pt.trace.json"]
    assert [t["name"] for t in entries["c1"]["tables"]] == ["rank0.profiler_out.txt"]
    assert entries["c1"]["kernels"] == []
    assert [t["name"] for t in entries["c2"]["tables"]] == ["rank0.profiler_out.txt"]
    (kernels,) = entries["c2"]["kernels"]
    assert kernels["name"] == "rank0.4.pt.trace.json" and kernels["rows"][0].name == CUTLASS
