"""``pocforge import --format kernels``: scripts/gpu-kernels.sh's ``kernels-bench.json`` from
a GPU node into a run's ``kernels/`` stage, each op's GPU profiler summary beside it, and
the dashboard's "Profiles — kernels" section from them. The benchmark's JSON is the kit's
own bench run here (``python -m pocforge_kernels.bench --json``, Triton's interpreter); the
summaries are real captures of both profilers gpu-kernels.sh runs, on both vendors' GPUs
(nsys on an NVIDIA H200; rocprofv3 on an AMD MI250X and an MI300A: tests/data/README.md),
each under the name gpu-kernels.sh gives it."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.results.importers import ResultImportError, import_files
from pocforge.results.store import RunStore
from pocforge.results.verify import verify

pytestmark = pytest.mark.process  # the bench runs in its own process; the store runs git

PROFILERS = Path(__file__).resolve().parents[1] / "data" / "profilers"
CAPTURE = PROFILERS / "nsys-cuda_gpu_kern_sum-csv-h200-vllm-moeresearch.csv"
# (capture, the name gpu-kernels.sh gives it, the profiler, its longest kernel's category)
CAPTURES = {
    "nsys-h200": (CAPTURE, "rms_norm_cuda_gpu_kern_sum.csv", "nsys", "MoE"),
    "rocprofv3-mi250x": (
        PROFILERS / "rocprofv3-kernel_stats-hip-jacobi-mi250x-frontier.csv",
        "rms_norm_kernel_stats.csv",
        "rocprofv3",
        "other",
    ),
    "rocprofv3-mi300a": (
        PROFILERS / "rocprofv3-kernel_stats-openmp-jacobi-mi300a-hpctraining.csv",
        "rms_norm_kernel_stats.csv",
        "rocprofv3",
        "norms, activations, elementwise",
    ),
}


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pocforge_kernels.bench", "--op", "rms_norm", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


def _gpu_kernels_out(
    folder: Path,
    doc: dict,
    profiler: str | None = "nsys",
    capture: Path = CAPTURE,
    name: str = "rms_norm_cuda_gpu_kern_sum.csv",
) -> Path:
    """The folder scripts/gpu-kernels.sh leaves: kernels-bench.json and profiles/<op>/."""
    folder.mkdir()
    if profiler:
        doc = {**doc, "profiler": profiler}
        op_dir = folder / "profiles" / "rms_norm"
        op_dir.mkdir(parents=True)
        shutil.copy(capture, op_dir / name)
        (op_dir / "stats.log").write_text("not a summary: left out\n")
    (folder / "kernels-bench.json").write_text(json.dumps(doc))
    return folder / "kernels-bench.json"


@pytest.mark.parametrize("case", sorted(CAPTURES))
def test_the_benchmark_and_its_kernel_summaries_become_a_run(bench_json, tmp_path, case):
    capture, name, profiler, where = CAPTURES[case]
    path = _gpu_kernels_out(tmp_path / f"gpu-{case}", bench_json, profiler, capture, name)
    store = RunStore(tmp_path / "results")
    run = import_files([path], "kernels", store=store, as_ref=f"{case}-kernels")
    results = json.loads((run.path / "kernels" / "results.json").read_text())
    assert [r["op"] for r in results["rows"]] == [r["op"] for r in bench_json["rows"]]
    assert all(r["ok"] for r in results["rows"]) and results["timed"] is False
    kept = run.path / "kernels" / "profiles" / "rms_norm"
    assert sorted(p.name for p in kept.iterdir()) == [name]
    assert (kept / name).read_bytes() == capture.read_bytes()
    assert verify(run.path).ok  # the summary is the run's own, checksummed
    page = render(run.path).read_text()
    (section,) = re.findall(
        r'<section class="page" id="profile-kernels">(.*?)</section>', page, re.S
    )
    assert "<h2>Profiles — kernels</h2>" in section and "<h3>Op rms_norm</h3>" in section
    assert f"GPU kernels by time, from {profiler}" in section
    href = f"kernels/profiles/rms_norm/{name}"
    assert f'<a href="{href}"><code>{name}</code></a>' in section
    with capture.open() as handle:  # the capture's longest kernel leads the table
        first = next(csv.DictReader(handle))
    rows = re.findall(r"<tr><td><code>(.*?)</code></td><td>(.*?)</td>", section)
    assert rows[0][0] == first["Name"].replace("<", "&lt;").replace(">", "&gt;")
    assert rows[0][1] == where  # H200: a grouped GEMM; the Jacobi kernels by their names
    assert "perfetto" not in section  # no traces here, and no word of them


def test_an_unprofiled_benchmark_has_no_profiles_section(bench_json, tmp_path):
    path = _gpu_kernels_out(tmp_path / "gpu", bench_json, profiler=None)
    run = import_files([path], "kernels", store=RunStore(tmp_path / "results"))
    assert (run.path / "kernels" / "results.json").is_file()
    assert 'id="profile-kernels"' not in render(run.path).read_text()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[1, 2]", "not a kernel benchmark's document; pass the kernels-bench.json"),
        ('{"rows": []}', "no metadata, timed: not a kernel benchmark's"),
    ],
)
def test_what_is_no_kernel_benchmark_is_refused_in_one_line(tmp_path, content, said):
    path = tmp_path / "kernels-bench.json"
    path.write_text(content)
    with pytest.raises(ResultImportError, match=re.escape(said)):
        import_files([path], "kernels", store=RunStore(tmp_path / "results"))


def test_a_profiled_benchmark_without_its_summaries_is_refused(bench_json, tmp_path):
    """kernels-bench.json copied without its profiles/ folder: said, not imported bare."""
    path = tmp_path / "kernels-bench.json"
    path.write_text(json.dumps({**bench_json, "profiler": "rocprofv3"}))
    with pytest.raises(ResultImportError, match="ran under rocprofv3 but .* holds no kernel"):
        import_files([path], "kernels", store=RunStore(tmp_path / "results"))
