"""The vendors' GPU profilers around a profiled launch (``profile.tool``).

Neither nsys nor rocprofv3 runs on this machine. What is checked here for real: the
launches each POC gets (golden plans hold the whole lines), rocprofv3's ROCTx gate in a real
Python process started the way a node starts it (torch's CUDA-profiler calls reach
``roctxProfilerResume``/``Pause`` of a C library built here with their signatures), and the
kit's handling of what the tools write: a report pending or whole, and each report summed
by ``nsys stats`` into the kernel table the dashboard parses (the command and where its
table lands; the table is a real capture, ``tests/data/profilers/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pocforge.frameworks import LaunchContext, gpu_profiler
from pocforge.frameworks.launch_plan import WORKDIR, NodeLaunch
from pocforge.frameworks.megatron import profile_args
from pocforge.frameworks.process import ManagedProcess
from pocforge.frameworks.profilers import PROFILERS, profiler
from pocforge.report import kernel_stats
from pocforge.runtimes import plan_nodes
from pocforge.spec import load_spec

from ..conftest import REPO

CAPTURE = REPO / "tests/data/profilers/nsys-cuda_gpu_kern_sum-csv-h200-vllm-moeresearch.csv"


def launch(argv: list[str], role: str = "server", **kwargs) -> NodeLaunch:
    return NodeLaunch("serving", "vllm", 0, "127.0.0.1", role, argv, **kwargs)


def test_nsys_records_the_cuda_profiler_ranges_with_a_report_each():
    argv = profiler("nsys").argv("/opt/pocforge/run/profiles/incoming")
    line = " ".join(argv)
    assert argv[:2] == ["nsys", "profile"]
    assert "--capture-range cudaProfilerApi --capture-range-end repeat" in line
    assert "--trace-fork-before-exec true" in line  # the server's workers
    assert line.endswith("--output /opt/pocforge/run/profiles/incoming/nsys-%h-%p")


def test_rocprofv3_starts_paused_with_its_counters():
    argv = profiler("rocprofv3").argv("/p", ["SQ_WAVES", "GRBM_GUI_ACTIVE"])
    assert argv[:2] == ["rocprofv3", "--selected-regions"]
    assert {"--kernel-trace", "--stats", "--marker-trace"} <= set(argv)
    assert argv[argv.index("--output-directory") + 1] == "/p/rocprofv3"
    assert argv[-4:] == ["--pmc", "SQ_WAVES", "GRBM_GUI_ACTIVE", "--"]
    with pytest.raises(ValueError, match="no profiler 'perf'"):
        profiler("perf")


def test_the_profiler_goes_right_before_the_frameworks_own_argv():
    plain = launch(["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000"])
    wrapped = gpu_profiler.wrapped(plain, "nsys", "/out")
    assert wrapped.argv[0] == "nsys" and wrapped.argv[-5:] == plain.argv
    # in a container: after the image and the kit's install line, the inner argv last
    inner = plain.argv
    outer = ["docker", "run", "--rm", "img", "sh", "-c", 'install && exec "$@"', "sh", *inner]
    boxed = launch(outer, runtime={"kind": "container", "inner_argv": inner})
    wrapped = gpu_profiler.wrapped(boxed, "rocprofv3", "/out")
    cut = outer.index("sh", 5) + 1
    assert wrapped.argv[:cut] == outer[:cut]
    assert wrapped.argv[cut] == "rocprofv3"
    assert wrapped.argv[-len(inner) :] == inner
    gate = wrapped.argv[wrapped.argv.index("--") + 1 : -len(inner)]
    assert gate == gpu_profiler.gate_argv()
    # a P/D router runs no model: left as it is
    router = launch(["python3", "-m", "pocforge.frameworks.pd_router"], role="router")
    assert gpu_profiler.wrapped(router, "nsys", "/out") is router


def test_the_example_pocs_profile_with_their_vendors_tool():
    """The golden plans hold the whole lines; these are the facts they encode."""
    ctx = LaunchContext(repo=REPO, python="python", sglang_python="python")
    amd = plan_nodes(load_spec(REPO / "pocs/deepseek-v3-fp8-mi355x-sglang/poc.yaml"), ctx)
    assert [one.role for one in amd] == ["server", "headless"]  # both nodes' engines
    for one in amd:
        line = one.command()
        image = line.index("lmsysorg/sglang-rocm")
        assert line.index("rocprofv3 --selected-regions") > image  # inside the container
        assert line.index("rocprofv3") < line.index("sglang.launch_server")
        assert f"{gpu_profiler.GATE_DIR}/sitecustomize.py" in one.files
        assert f"--volume '{WORKDIR}:{WORKDIR}'" in line  # the gate's folder is mounted
    vllm = load_spec(REPO / "pocs/llama-3.1-70b-fp8-h200-vllm-pd/poc.yaml")
    prefill = next(one for one in plan_nodes(vllm, ctx) if one.role == "prefill")
    assert (
        '--profiler-config \'{"profiler":"cuda","delay_iterations":1,"max_iterations":32}\''
        in prefill.command()
    )
    nvidia = plan_nodes(load_spec(REPO / "pocs/llama-3.1-70b-fp8-h200-vllm-pd/poc.yaml"), ctx)
    roles = {one.role: "nsys profile" in one.command() for one in nvidia}
    assert roles == {"prefill": True, "decode": True, "router": False}
    assert all(not one.files for one in nvidia if one.role != "router")  # no gate for nsys


def test_megatron_marks_the_steps_for_a_gpu_tool_without_torchs_profiler():
    assert profile_args([20, 21], 2, "nsys") == [
        "--profile",
        "--profile-step-start", "21",
        "--profile-step-end", "23",
        "--profile-ranks", "0", "1",
    ]  # fmt: skip
    torch = profile_args([20, 21], 2)
    assert "--use-pytorch-profiler" in torch and "--tensorboard-dir" in torch


def test_an_nsys_report_is_pending_until_written(tmp_path):
    raw, report = tmp_path / "nsys-h-1.qdstrm", tmp_path / "nsys-h-1.nsys-rep"
    assert PROFILERS["nsys"].pending([], "vllm") == ["an nsys report"]
    assert PROFILERS["nsys"].pending([raw], "vllm") == [raw.name]
    assert PROFILERS["nsys"].pending([report], "vllm") == []


@pytest.mark.process
def test_each_report_is_summed_into_the_kernel_table_the_dashboard_reads(tmp_path):
    """A stand-in for ``nsys`` (it does not run here) records its arguments and writes the
    real capture where ``nsys stats --output <stem>`` writes its table."""
    calls = tmp_path / "calls"
    nsys = tmp_path / "nsys"
    nsys.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            echo "$@" >> {calls}
            while [ "$1" != "--output" ]; do shift; done
            cp {CAPTURE} "$2_cuda_gpu_kern_sum.csv"
            """)
    )
    nsys.chmod(0o755)
    reports = [tmp_path / "nsys-h200-01-4242.1.nsys-rep", tmp_path / "trace.pt.trace.json.gz"]
    for path in reports:
        path.write_bytes(b"x")
    assert PROFILERS["nsys"].summarize(reports, str(nsys)) == []
    (call,) = calls.read_text().splitlines()
    stem = tmp_path / "nsys-h200-01-4242.1"
    assert call == (
        "stats --report cuda_gpu_kern_sum --format csv --force-export true "
        f"--output {stem} {reports[0]}"
    )
    table = kernel_stats.read(Path(f"{stem}_cuda_gpu_kern_sum.csv"))
    assert table is not None and table.kernels[0].name.startswith("void cutlass::device_kernel")
    failing = tmp_path / "nsys-fails"
    failing.write_text("#!/bin/sh\necho 'ERROR: the report is damaged' >&2\nexit 1\n")
    failing.chmod(0o755)
    (problem,) = PROFILERS["nsys"].summarize(reports, str(failing))
    assert problem == f"{reports[0].name}: nsys stats exited 1: ERROR: the report is damaged"
    (missing,) = PROFILERS["nsys"].summarize(reports, str(tmp_path / "no-nsys"))
    assert missing.startswith(f"{reports[0].name}: nsys stats: ")


def test_a_trainer_under_nsys_has_its_reports_summed_where_its_output_names(tmp_path, monkeypatch):
    """After a finite launch under nsys (a trainer), the reports in the folder its
    ``--output`` names, relative to the working directory, are each summed once; a launch
    not under nsys sums nothing."""
    from pocforge.frameworks.node_launcher import nsys_reports_summed

    calls = tmp_path / "calls"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nsys").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (tmp_path / "bin" / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    trainer = gpu_profiler.wrapped(launch(["python", "train.py"], role="trainer"), "nsys", "out")
    workdir = tmp_path / "work"
    (workdir / "out").mkdir(parents=True)
    (workdir / "out" / "nsys-h1-7.1.nsys-rep").write_bytes(b"report")
    assert nsys_reports_summed(trainer, workdir) == []
    (call,) = calls.read_text().splitlines()
    assert call.startswith("stats --report cuda_gpu_kern_sum") and call.endswith(
        f"{workdir / 'out' / 'nsys-h1-7.1.nsys-rep'}"
    )
    assert nsys_reports_summed(launch(["python", "train.py"], role="trainer"), workdir) == []
    assert len(calls.read_text().splitlines()) == 1


@pytest.fixture(scope="module")
def roctx_library(tmp_path_factory) -> Path:
    """A C library with ROCTx's profiler-control signatures that logs each call."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the ROCTx stand-in")
    folder = tmp_path_factory.mktemp("roctx")
    source = folder / "roctx.c"
    source.write_text(
        textwrap.dedent("""\
            #include <stdint.h>
            #include <stdio.h>
            #include <stdlib.h>
            static int note(const char *what, uint64_t tid) {
              FILE *log = fopen(getenv("ROCTX_LOG"), "a");
              fprintf(log, "%s %lu\\n", what, (unsigned long)tid);
              return fclose(log);
            }
            int roctxProfilerResume(uint64_t tid) { return note("resume", tid); }
            int roctxProfilerPause(uint64_t tid) { return note("pause", tid); }
            """)
    )
    library = folder / "libroctx-standin.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def _run_gated(tmp_path: Path, code: str, library: Path) -> tuple[int, str, str]:
    """``code`` in a Python process started as a node starts a rocprofv3 launch: the
    gate's file in its working directory, ``sh -c 'export PYTHONPATH=…'`` before it."""
    log = tmp_path / "roctx.log"
    plain = launch(
        [*gpu_profiler.gate_argv(), sys.executable, "-c", code],
        env={
            "ROCTX_LOG": str(log),
            "POCFORGE_ROCTX_LIBRARY": str(library),
            "PYTHONPATH": "/already/there",
        },
    )
    gated = gpu_profiler.with_gate_file(plain, "rocprofv3")
    process = ManagedProcess(gated, tmp_path / "run.log", workdir=tmp_path / "work").start()
    code = process.wait(120)
    calls = log.read_text() if log.exists() else ""
    return code, calls, (tmp_path / "run.log").read_text()


@pytest.mark.process
def test_the_gate_sends_torchs_cuda_profiler_calls_to_roctx(tmp_path, roctx_library):
    """vLLM's workers call ``torch.cuda.profiler.start()``/``stop()``; SGLang and Megatron
    ``torch.cuda.cudart().cudaProfilerStart()``/``Stop()``: each reaches ROCTx, with
    thread id 0 (the whole process), and the launch's own ``PYTHONPATH`` is kept."""
    code, calls, log = _run_gated(
        tmp_path,
        "import os, torch, torch.cuda.profiler as p\n"
        "p.start(); p.stop()\n"
        "torch.cuda.cudart().cudaProfilerStart(); torch.cuda.cudart().cudaProfilerStop()\n"
        "print('path', os.environ['PYTHONPATH'])\n",
        roctx_library,
    )
    assert code == 0, log
    assert calls.splitlines() == ["resume 0", "pause 0", "resume 0", "pause 0"]
    site = tmp_path / "work" / gpu_profiler.GATE_DIR
    assert f"path {site}:/already/there" in log


@pytest.mark.process
def test_the_gate_leaves_a_process_without_torch_alone(tmp_path, roctx_library):
    code, calls, log = _run_gated(
        tmp_path, "import sys; print('torch' in sys.modules)", roctx_library
    )
    assert code == 0 and log.rstrip().endswith("False") and calls == ""


@pytest.mark.process
def test_the_gate_without_a_roctx_library_says_what_to_install(tmp_path, roctx_library):
    code, _, log = _run_gated(
        tmp_path, "import torch; torch.cuda.profiler.start()", tmp_path / "missing.so"
    )
    assert code != 0
    assert "rocprofv3's gate found no ROCTx library" in log
    assert "install rocprofiler-sdk-roctx in the runtime, or set POCFORGE_ROCTX_LIBRARY" in log
