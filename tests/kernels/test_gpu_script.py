"""scripts/gpu-kernels.sh, the one-call kernel benchmark for a lent GPU, rehearsed on this CPU.

On a CPU the benchmark checks correctness only; what is tested here is the script's own
work: the checkout used in place without an install, one process per op, a failed op
kept as a failed row while the others' results survive, one merged document.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pocforge.report import kernel_stats

ROOT = Path(__file__).resolve().parents[2]
PROFILERS = ROOT / "tests" / "data" / "profilers"
# real captures (tests/data/README.md): what the stand-ins below write as the tools' tables
NSYS_TABLE = PROFILERS / "nsys-cuda_gpu_kern_sum-csv-h200-vllm-moeresearch.csv"
ROCPROF_TABLE = PROFILERS / "rocprofv3-kernel_stats-hip-jacobi-mi250x-frontier.csv"


def _run(tmp_path, ops, **extra):
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), OPS=ops, **extra)
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-kernels.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_rehearsal_merges_every_op_keeps_a_failed_one_as_a_row_and_uses_the_checkout_in_place(
    tmp_path,
):
    """Every op in its own process, one merged document: an op that fails is a failed row
    (and the exit status 1), the ops around it keep their results."""
    proc = _run(tmp_path, "rms_norm no_such_op silu_and_mul")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "out"
    env_txt = (out / "env.txt").read_text()
    assert "torch" in env_txt and "triton" in env_txt
    assert "/site/pocforge_kernels/__init__.py" in env_txt  # not the installed copy
    doc = json.loads((out / "kernels-bench.json").read_text())
    rows = {row["op"]: row for row in doc["rows"]}
    # the ops that left no result come after the others' rows
    assert list(rows) == ["rms_norm", "silu_and_mul", "no_such_op"] and doc["timed"] is False
    assert rows["rms_norm"]["correct"] is True and rows["silu_and_mul"]["correct"] is True
    assert rows["no_such_op"]["correct"] is False and "no result" in rows["no_such_op"]["error"]
    log = (out / "kernels-bench.log").read_text()
    assert "!! no_such_op exited with" in log and "== silu_and_mul" in log


def test_ops_past_the_budget_are_skipped_and_reported(tmp_path):
    """A lent machine allows 10 minutes a call: the loop stops starting ops near its budget."""
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), OPS="rms_norm")
    env["BUDGET_S"] = "10"  # under the 20 s an op needs to be started
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-kernels.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "!! rms_norm skipped: the 10 s budget is spent" in proc.stdout
    assert "no op left a result" in proc.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            {"PROFILER": "perf"},
            "PROFILER=perf: the profilers are nsys (NVIDIA) and rocprofv3 (AMD)",
        ),
        (
            {"PROFILER": "nsys", "COUNTERS": "SQ_WAVES"},
            "COUNTERS=SQ_WAVES: hardware counters are read by rocprofv3",
        ),
        (
            {"PROFILER": "rocprofv3", "PATH": "/usr/bin:/bin"},
            "PROFILER=rocprofv3: rocprofv3 is not on PATH; install ROCm's rocprofiler-sdk, or unset PROFILER",
        ),
    ],
)
def test_a_profiler_it_cannot_run_is_one_line_before_any_op(tmp_path, extra, said):
    proc = _run(tmp_path, "rms_norm", **extra)
    assert proc.returncode == 2
    assert proc.stderr.strip() == said or proc.stderr.strip().startswith(said), proc.stderr
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def _stand_in(folder: Path, name: str, body: str) -> None:
    """A stand-in for a vendor's profiler (neither runs without its GPU): it logs its
    arguments, writes a real capture where the tool writes its table, and runs the op."""
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + f'echo "$@" >> {folder / "calls"}\n' + textwrap.dedent(body))
    tool.chmod(0o755)


def test_each_op_runs_under_nsys_and_its_report_is_summed(tmp_path):
    bin_dir = tmp_path / "bin"
    _stand_in(
        bin_dir,
        "nsys",
        f"""\
        if [ "$1" = stats ]; then
          while [ "$1" != --output ]; do shift; done
          cp {NSYS_TABLE} "$2_cuda_gpu_kern_sum.csv"; exit 0
        fi
        while [ "$1" != --output ]; do shift; done
        out=$2; shift 2
        "$@"; code=$?
        echo report > "$out.nsys-rep"; exit $code
        """,
    )
    path = f"{bin_dir}:{os.environ['PATH']}"
    op = "silu_and_mul"
    proc = _run(tmp_path, op, PROFILER="nsys", PATH=path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "out"
    doc = json.loads((out / "kernels-bench.json").read_text())
    assert doc["profiler"] == "nsys" and all(row["correct"] for row in doc["rows"])
    calls = (bin_dir / "calls").read_text().splitlines()
    folder = out / "profiles" / op
    assert (
        f"profile --trace cuda,nvtx,osrt --cuda-graph-trace node --force-overwrite true --output {folder}/{op} {sys.executable} -m pocforge_kernels.bench --op {op}"
        in "\n".join(calls)
    )
    assert (
        f"stats --report cuda_gpu_kern_sum --format csv --force-export true --output {folder}/{op} {folder}/{op}.nsys-rep"
        in calls
    )
    table = kernel_stats.read(folder / f"{op}_cuda_gpu_kern_sum.csv")  # what the page reads
    assert table is not None and table.tool == "nsys" and table.top()
    assert f"== {op} (at most 180 s) under nsys profile" in proc.stdout


def test_each_op_runs_under_rocprofv3_with_its_counters(tmp_path):
    bin_dir = tmp_path / "bin"
    _stand_in(
        bin_dir,
        "rocprofv3",
        f"""\
        while [ "$1" != --output-directory ]; do shift; done
        dir=$2; shift 2; file=$2
        while [ "$1" != -- ]; do shift; done; shift
        "$@"; code=$?
        cp {ROCPROF_TABLE} "$dir/${{file}}_kernel_stats.csv"; exit $code
        """,
    )
    path = f"{bin_dir}:{os.environ['PATH']}"
    proc = _run(
        tmp_path, "rms_norm", PROFILER="rocprofv3", COUNTERS="SQ_WAVES GRBM_COUNT", PATH=path
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "out"
    folder = out / "profiles" / "rms_norm"
    (call,) = (bin_dir / "calls").read_text().splitlines()
    assert call.startswith(
        f"--kernel-trace --stats --output-format csv --output-directory {folder} --output-file rms_norm --pmc SQ_WAVES GRBM_COUNT -- {sys.executable} -m pocforge_kernels.bench"
    )
    table = kernel_stats.read(folder / "rms_norm_kernel_stats.csv")
    assert table is not None and table.tool == "rocprofv3"
    assert json.loads((out / "kernels-bench.json").read_text())["profiler"] == "rocprofv3"
