"""The training importers (megatron-log, dgxc) on real training logs: every expected number
is read off the log's own lines (sources in tests/data/README.md: megatron/ and
importers/dgxc/), and broken or foreign files are one clear line naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pocforge.catalog import gpu
from pocforge.results.importers import DTYPES, ResultImportError, import_files, parse
from pocforge.results.run_reader import RunData
from pocforge.results.schema import load_document
from pocforge.results.stage_schema import TrainingResult
from pocforge.results.store import Run
from pocforge.results.verify import verify
from pocforge.stats import harmonic_mean
from pocforge.training.megatron_log import read_log

DATA = Path(__file__).resolve().parents[1] / "data"
M = DATA / "megatron"
DGXC = DATA / "importers" / "dgxc"
PRIMUS = M / "primus_llama2_7b_mi325x_8node.log"
ROCM = M / "rocm_megatron_lm_llama31_70b_mi325x_8node.out"
MIXTRAL = M / "megatron_lm_mixtral_8x7b_h100_16gpu.log"
EPFL = M / "megatron_llm_epfl_issue11.log"
NEMO = DGXC / "nemo2_qwen3_30b_a3b_issue14850.log"
BRIDGE = DGXC / "megatron_bridge_llama31_8b_dgxc_readme.log"
WRAPPED = DGXC / "megatron_bridge_pr841_terminal_wrapped.log"
POCFORGE = str(Path(sys.executable).parent / "pocforge")


# --------------------------------------------------------------------------- megatron-log


def test_rocm_megatron_log_matches_the_scripts_own_summary() -> None:
    """ROCm/Megatron-LM 70B on 64 MI325X: the TFLOP/s of iterations 2–10 as printed, tokens
    derived from the dump's GBS 256 / seq_length 8192 / world_size 64; both agree with the
    ROCm train script's own summary at the end of the log to 0.1%."""
    result = parse([ROCM], "megatron-log").training
    printed = [816.2, 813.4, 816.0, 823.5, 829.9, 831.6, 830.1, 830.0, 829.5]
    elapsed_ms = [19329.3, 19394.2, 19332.6, 19156.6, 19008.1, 18970.7, 19005.2, 19007.0, 19019.0]
    assert result.tool == "megatron-log" and result.framework == "megatron"
    assert result.world_size == 64 and result.warmup_steps == 1
    assert result.tflops_per_gpu == pytest.approx(harmonic_mean(printed))
    tokens = harmonic_mean([256 * 8192 / 64 / (ms / 1000) for ms in elapsed_ms])
    assert result.tokens_per_s_per_gpu == pytest.approx(tokens)
    assert result.tflops_per_gpu == pytest.approx(824.9285714285716, rel=1e-3)
    assert result.tokens_per_s_per_gpu == pytest.approx(1713.367156, rel=1e-3)
    assert [s.step for s in result.steps] == list(range(1, 11))
    assert result.steps[1].step_time_s == pytest.approx(19.3293)
    assert result.steps[1].tokens == 256 * 8192
    # [Rank 0] (after 1 iterations) memory (MB) | ... | max allocated: 140046.63720703125 (MiB)
    assert result.peak_memory_gb == pytest.approx(140046.63720703125 * 2**20 / 1e9)
    assert result.mfu is None and any("give --gpu and --dtype" in n for n in result.notes)
    assert result.differences and result.definitions["tflops_per_gpu"]


def test_primus_log_rates_agree_with_primus_running_mean_and_mfu_from_the_catalog() -> None:
    """AMD Primus, 64 MI325X, FP8: Primus prints tokens/s/GPU itself (the first of its X/Y
    pairs); iteration 50 prints its running means 943.5 TFLOP/s and 20472.8 tokens/s."""
    result = parse([PRIMUS], "megatron-log", gpu="MI325X", dtype="fp8").training
    lines = [r for r in read_log(PRIMUS).iterations if r.iteration > 1]
    assert result.tflops_per_gpu == pytest.approx(harmonic_mean(r.tflops_per_gpu for r in lines))
    assert result.tflops_per_gpu == pytest.approx(943.5, rel=1e-3)
    assert result.tokens_per_s_per_gpu == pytest.approx(20472.8, rel=1e-3)
    assert result.mfu == pytest.approx(result.tflops_per_gpu / gpu("MI325X").fp8_tflops)
    assert result.dtype == "fp8" and result.gpu == "MI325X" and result.world_size == 64
    assert result.steps[-1].loss == pytest.approx(6.969567)  # iteration 50's lm loss
    assert result.peak_memory_gb == pytest.approx(111506.17822265625 * 2**20 / 1e9)


def test_mixtral_excerpts_need_gpus_and_give_no_tokens_without_a_sequence_length() -> None:
    """NVIDIA Megatron-LM, Mixtral 8x7B on 16 H100: no arguments dump, so the world size is
    --gpus; throughput per GPU is printed, tokens/s are not (and no seq length is known)."""
    with pytest.raises(ResultImportError, match="does not name its world size: give --gpus"):
        parse([MIXTRAL], "megatron-log")
    result = parse([MIXTRAL], "megatron-log", gpus=16, gpu="H100", dtype="bfloat16").training
    assert result.world_size == 16 and result.tokens_per_s_per_gpu is None
    assert any("give --seq-len" in n for n in result.notes)
    assert result.steps[-1].loss == pytest.approx(1.798953)  # iteration 73 (last excerpt)
    assert result.mfu == pytest.approx(result.tflops_per_gpu / 989.4)
    with_len = parse([MIXTRAL], "megatron-log", gpus=16, seq_len=4096).training
    gbs_128 = [r for r in read_log(MIXTRAL).iterations if r.iteration > 1]
    assert with_len.tokens_per_s_per_gpu == pytest.approx(
        harmonic_mean(128 * 4096 / 16 / (r.elapsed_ms / 1000) for r in gbs_128)
    )


def test_a_log_without_throughput_has_only_its_loss_curve() -> None:
    """epfLLM/Megatron-LLM prints neither TFLOP/s nor tokens/s: no rate is made up."""
    result = parse([EPFL], "megatron-log", gpus=8).training
    assert result.tflops_per_gpu is None and result.tokens_per_s_per_gpu is None
    assert result.mfu is None
    assert result.steps[0].step == 2 and result.steps[0].loss == pytest.approx(3.198731)
    assert result.steps[-1].step == 204 and result.steps[-1].loss == pytest.approx(2.425973)
    assert result.steps[0].step_time_s == pytest.approx(17.4716)


def test_world_size_on_the_command_line_must_agree_with_the_log() -> None:
    with pytest.raises(ResultImportError, match="--gpus 8 but the log's world_size is 64"):
        parse([PRIMUS], "megatron-log", gpus=8)


def test_warmup_option_moves_the_window() -> None:
    result = parse([ROCM], "megatron-log", warmup=3).training
    assert result.warmup_steps == 3
    assert result.tflops_per_gpu == pytest.approx(
        harmonic_mean([816.0, 823.5, 829.9, 831.6, 830.1, 830.0, 829.5])
    )
    with pytest.raises(ResultImportError, match="no logged step after iteration 10"):
        parse([ROCM], "megatron-log", warmup=10)


# --------------------------------------------------------------------------- dgxc


def test_nemo2_log_as_dgxc_reads_it() -> None:
    """NeMo 2 perf script (Qwen3 30B-A3B), lines behind Slurm's ``0: ``: step time, NeMo's
    TFLOPS_per_GPU and reduced_train_loss as printed; iteration 8 (TFLOPS 48.58) is warm-up."""
    result = parse([NEMO], "dgxc", gpus=32, warmup=8, seq_len=4096).training
    times = [27.88, 26.63, 26.93, 26.78, 26.68]  # iterations 9, 10, 11, 28, 29
    assert result.tool == "dgxc" and result.framework == "nemo" and result.warmup_steps == 8
    assert result.tflops_per_gpu == pytest.approx(harmonic_mean([85.8, 85.8, 85.8, 85.31, 85.4]))
    assert result.tokens_per_s_per_gpu == pytest.approx(
        harmonic_mean(512 * 4096 / 32 / t for t in times)
    )
    assert [s.step for s in result.steps] == [8, 9, 10, 11, 28, 29]
    assert [s.loss for s in result.steps] == [10.22, 10.1, 10.06, 9.924, 9.484, 9.426]
    assert result.steps[0].step_time_s == 27.01 and result.steps[0].tokens == 512 * 4096
    assert result.final_loss == pytest.approx((9.924 + 9.484 + 9.426) / 3)
    assert result.peak_memory_gb == pytest.approx(53930270720 / 1e9)  # max_memory_allocated


def test_dgxc_window_is_its_own_35_to_44_by_default() -> None:
    """dgxc-benchmarking averages iterations 35–44; a 30-step log has none of them."""
    with pytest.raises(
        ResultImportError, match=r"no logged step iterations 35–44 .*last logged: 29"
    ):
        parse([NEMO], "dgxc", gpus=32)


def test_megatron_bridge_log_as_dgxc_reads_it() -> None:
    """Megatron-Bridge Llama 3.1 8B (dgxc-benchmarking README, 8 GPUs, GBS 128, bf16), one
    iteration after a checkpoint load: elapsed 20289.1 ms, lm loss 1.258695E+01."""
    result = parse(
        [BRIDGE], "dgxc", gpus=8, warmup=0, seq_len=8192, gpu="B200", dtype="bfloat16"
    ).training
    assert result.framework == "megatron-bridge" and result.world_size == 8
    assert result.steps[0].loss == pytest.approx(12.58695)
    assert result.tokens_per_s_per_gpu == pytest.approx(128 * 8192 / 8 / 20.2891)
    assert result.tflops_per_gpu is None and result.mfu is None  # no Step Time line


def test_terminal_wrapped_megatron_lines_are_refused_naming_the_line() -> None:
    """Megatron-Bridge's own PR #841 log, pasted as wrapped by an 88-column terminal: the
    first iteration line lost its elapsed time to the next line."""
    with pytest.raises(ResultImportError) as info:
        parse([WRAPPED], "dgxc", gpus=8)
    message = str(info.value)
    assert message.startswith(f"{WRAPPED}:1:") and "elapsed time per iteration" in message


def test_a_log_cut_mid_line_at_its_end_keeps_the_complete_steps(tmp_path: Path) -> None:
    text = NEMO.read_text()
    cut = text[: text.index("train_step_timing in s: 26.68")]
    path = tmp_path / "cut.log"
    path.write_text(cut)
    result = parse([path], "dgxc", gpus=32, warmup=8).training
    assert [s.step for s in result.steps] == [8, 9, 10, 11, 28]


# --------------------------------------------------------------------------- broken files


def _cut(path: Path, marker: str) -> str:
    text = path.read_text(errors="replace")
    return text[: text.index(marker)]


BROKEN = [
    ("dgxc", lambda: NEMO.read_text()[:150], r"no complete NeMo step line .*truncated\?"),
    ("megatron-log", lambda: _cut(PRIMUS, "elapsed time per iteration"), "no Megatron iteration lines"),
    ("dgxc", lambda: NEMO.read_bytes()[:300] + b"\x00\x01\xfe\xff" * 8, "binary data"),
    ("megatron-log", lambda: PRIMUS.read_bytes()[:300] + b"\x00\x01\xfe\xff" * 8, "binary data"),
    ("dgxc", lambda: (DATA / "importers" / "vllm-c1.json").read_text(), "not a dgxc-benchmarking training log"),
    ("megatron-log", lambda: (DATA / "importers" / "mad" / "perf_Kimi-K3.csv").read_text(), "no Megatron iteration lines"),
    ("megatron-log", lambda: NEMO.read_text(), "NeMo 2 step lines .*--format dgxc"),
    ("dgxc", lambda: (DATA / "collectives" / "rccl_all_reduce_mi300x_1node_8gpu.txt").read_text(), "not a dgxc-benchmarking training log"),
    ("dgxc", lambda: "\n", "empty file"),
    ("megatron-log", lambda: "", "empty file"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fmt", "make", "match"),
    BROKEN,
    ids=["dgxc-truncated", "megatron-truncated", "dgxc-binary", "megatron-binary",
         "dgxc-vllm-json", "megatron-mad-csv", "megatron-nemo-log", "dgxc-rccl-text",
         "dgxc-empty", "megatron-empty"],
)  # fmt: skip
def test_broken_files_give_one_line_naming_the_file(tmp_path: Path, fmt, make, match) -> None:
    """Truncations and binary tails are made from the real logs; the wrong-schema files are
    other tools' real output."""
    data = make()
    path = tmp_path / "train.log"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(ResultImportError, match=match) as info:
        parse([path], fmt, gpus=8, warmup=0)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_options_are_checked_before_any_file_is_read() -> None:
    with pytest.raises(ResultImportError, match="one log per run"):
        parse([NEMO, NEMO], "dgxc", gpus=32)
    with pytest.raises(ResultImportError, match="unknown GPU type 'MI999'"):
        parse([PRIMUS], "megatron-log", gpu="MI999")
    with pytest.raises(ResultImportError, match="unknown dtype 'int4'"):
        parse([PRIMUS], "megatron-log", dtype="int4")
    vllm = DATA / "importers" / "vllm-c1.json"
    with pytest.raises(ResultImportError, match="--warmup: for training logs"):
        parse([vllm], "vllm", warmup=2)
    assert parse([vllm], "vllm", gpu="MI300X").serving[0].gpu == "MI300X"


def test_cli_dtype_choices_are_the_importer_dtypes() -> None:
    from pocforge.cli.results import import_cmd

    option = next(p for p in import_cmd.params if p.name == "dtype")
    assert isinstance(option.type, click.Choice) and tuple(option.type.choices) == DTYPES


# --------------------------------------------------------------------------- runs


@pytest.mark.process
def test_imported_training_run_reads_like_a_measured_one(store) -> None:
    """training/result.json is the kit's TrainingResult: the run reader, the manifest and
    the kept input agree."""
    run = import_files([ROCM], "megatron-log", store=store, as_ref="demo/rocm70b", gpu="MI325X")
    data = RunData.load(Run.open(run.path))
    assert not data.problems and data.training is not None and not data.serving
    assert data.training == load_document(run.path / "training" / "result.json", TrainingResult)
    assert data.training.tflops_per_gpu == pytest.approx(824.9285714285716, rel=1e-3)
    assert verify(run.path).ok and run.manifest.imported_from.tool == "megatron-log"
    assert (run.path / "imported" / ROCM.name).read_bytes() == ROCM.read_bytes()


def _pocforge(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([POCFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.process
@pytest.mark.slow
def test_cli_import_verify_report_of_a_training_log(tmp_path: Path) -> None:
    """As a user runs it: import a Primus log with its GPU and dtype, verify the run, render
    its dashboard; a foreign file is one line and exit 2."""
    root = str(tmp_path / "results")
    done = _pocforge(
        "import", str(PRIMUS), "--format", "megatron-log", "--gpu", "MI325X", "--dtype", "fp8",
        "--as", "llama2-primus/r1", "--root", root, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_path = tmp_path / "results" / "llama2-primus" / "r1"
    result = json.loads((run_path / "training" / "result.json").read_text())
    assert result["kind"] == "pocforge-training" and result["tool"] == "megatron-log"
    checked = _pocforge("results", "verify", "llama2-primus/r1", "--root", root, cwd=tmp_path)
    assert checked.returncode == 0 and ": ok (" in checked.stdout, checked.stdout
    report = _pocforge("report", "llama2-primus/r1", "--root", root, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    page = (run_path / "dashboard.html").read_text()
    mfu = 100 * result["mfu"]
    assert "megatron, 64 ranks, fp8; 1 warm-up steps excluded from throughput." in page
    assert f"{mfu:.1f}%" in page and "imported from megatron-log" in page
    nemo = _pocforge(
        "import", str(NEMO), "--format", "dgxc", "--gpus", "32", "--warmup", "8",
        "--seq-len", "4096", "--as", "qwen3/nemo", "--root", root, cwd=tmp_path,
    )  # fmt: skip
    assert nemo.returncode == 0, nemo.stderr
    bad = _pocforge(
        "import", str(DATA / "importers" / "vllm-c1.json"), "--format", "dgxc", "--gpus", "8",
        "--root", root, cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "not a dgxc-benchmarking training log" in bad.stderr and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- steady state


def test_warm_up_is_found_by_what_it_is_and_said() -> None:
    """Without --warmup the window starts where the run is steady: Primus' iteration 1
    (306 s of setup) covers the first iteration and is left out; iterations 2–50 are within
    5% of their median pace, so none more is; the note names the iterations used."""
    result = parse([PRIMUS], "megatron-log").training
    assert result.warmup_steps == 1
    assert result.notes[1:3] == [
        "warm-up by stability: the first logged line (iteration 1) covers the first iteration",
        "rates are harmonic means over the 49 logged step(s) of iterations 2–50; "
        "iterations <= 1 are warm-up",
    ]


@pytest.mark.parametrize(
    ("name", "gpus", "steady", "with_first"),
    [
        ("megatron_core_r0.8.0_gpt7b_1node_8gpu_log_interval_10.log", 8, 876.3617945276801, 812.5),
        (
            "megatron_core_r0.8.0_gpt7b_2node_16gpu_log_interval_10.log",
            16,
            801.7152094021976,
            748.3,
        ),
    ],
)
def test_with_log_interval_10_the_first_line_is_ten_iterations_of_warm_up(
    name, gpus, steady, with_first
) -> None:
    """Megatron-LM core_r0.8.0 pretraining a GPT 7B with ``--log-interval 10`` on one node
    and on two: the line of iteration 10 averages iterations 1–10 (all ten skipped by the
    loss scaler, no loss printed) and is left out as a whole; the rate is the harmonic mean
    of iterations 20–100's lines as printed. Averaging that first line in would read the
    one-node run 0.8% low."""
    result = parse([M / name], "megatron-log", gpus=gpus).training
    assert (result.world_size, result.warmup_steps) == (gpus, 10)
    assert result.tflops_per_gpu == pytest.approx(steady)
    printed = [r.tflops_per_gpu for r in read_log(M / name).iterations]
    assert printed[0] == with_first and len(printed) == 10
    assert result.tflops_per_gpu == pytest.approx(harmonic_mean(printed[1:]))
    assert harmonic_mean(printed) < steady
    assert result.notes[:2] == [
        "warm-up by stability: the first logged line (iteration 10) covers the first iteration",
        "rates are harmonic means over the 9 logged step(s) of iterations 20–100; "
        "iterations <= 10 are warm-up",
    ]


def test_a_run_that_slows_down_later_keeps_its_fast_start() -> None:
    """Warm-up is slow: the EPFL log (its first line iteration 2, 17 s; then 86–139 s as the
    run degrades) leaves nothing out, where a two-sided rule would drop the fast start."""
    result = parse([EPFL], "megatron-log", gpus=8).training
    assert result.warmup_steps == 0
    assert "no warm-up found: the first logged step is already steady" in result.notes


def test_a_lone_first_iteration_is_warm_up_not_a_rate() -> None:
    """FlagScale's log holds iteration 1 alone (271.6 s of setup): refused, not averaged."""
    with pytest.raises(ResultImportError, match="no logged step after iteration 1 to average"):
        parse([M / "flagscale_openseek_default0.log"], "megatron-log", gpus=8)


def test_nemo_steps_are_the_runs_global_steps_across_epochs() -> None:
    """NeMo's 'iteration N/M' restarts every epoch: a log of epochs 1 and 2 is keyed by its
    global_step (19, 29, 45, 46, 48), never 0, 10, 7, 8, 10."""
    log = DGXC / "nemo2_l40s_two_epochs_awsome_k8s.log"
    result = parse([log], "dgxc", gpus=4, warmup=0).training
    assert [s.step for s in result.steps] == [19, 29, 45, 46, 48]
    assert [s.step_time_s for s in result.steps] == [46.86, 46.84, 47.12, 47.15, 46.81]
    assert "iterations 19–48" in result.notes[1]
