"""The Megatron log parser on real logs (tests/data/megatron/, sources in tests/data/README.md):
upstream Megatron-LM with and without throughput, ROCm/Megatron-LM, AMD Primus, a FlagScale
fork behind a torchrun prefix; expected values are read from the files (golden)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.training.megatron_log import parse_text, read_log, steady_state

D = Path(__file__).resolve().parents[1] / "data" / "megatron"
PRIMUS = D / "primus_llama2_7b_mi325x_8node.log"
ROCM = D / "rocm_megatron_lm_llama31_70b_mi325x_8node.out"
MIXTRAL = D / "megatron_lm_mixtral_8x7b_h100_16gpu.log"
OLD = D / "megatron_llm_epfl_issue11.log"


@pytest.mark.parametrize(
    ("file", "count", "first", "last", "elapsed", "tflops", "gbs", "loss"),
    [
        (MIXTRAL, 14, 2, 73, 5829.9, 224.0, 128, 1.798953),
        (OLD, 16, 2, 204, 140197.9, None, 1024, 2.425973),
        (ROCM, 10, 1, 10, 19019.0, 829.5, 256, 14.50441),
        (PRIMUS, 50, 1, 50, 6403.1, 943.4, 2048, 6.969567),
        (D / "megatron_lm_pr5662_memory_report.log", 1, 20, 20, 744.0, None, 16, 1.020935),
        (D / "flagscale_openseek_default0.log", 1, 1, 1, 271607.0, 40.4, 1024, 11.92634),
    ],
)
def test_iteration_lines_golden(file, count, first, last, elapsed, tflops, gbs, loss) -> None:
    """Every iteration line of each real log is a record; the last one's fields as printed."""
    records = read_log(file).iterations
    assert (len(records), records[0].iteration, records[-1].iteration) == (count, first, last)
    end = records[-1]
    assert (end.elapsed_ms, end.tflops_per_gpu, end.global_batch_size) == (elapsed, tflops, gbs)
    assert end.lm_loss == pytest.approx(loss)
    assert all(r.skipped == 0 and r.nan == 0 for r in records)
    assert [r.iteration for r in records] == sorted(r.iteration for r in records)


def test_older_megatron_has_no_throughput_nor_timestamp() -> None:
    """Megatron-LLM (2023) prints elapsed time only: TFLOP/s and tokens/s stay None."""
    records = read_log(OLD).iterations
    assert all(r.tflops_per_gpu is None and r.tokens_per_s_per_gpu is None for r in records)
    assert records[0].timestamp is None and records[0].train_iters == 250000
    assert (records[0].learning_rate, records[0].grad_norm) == (1.5e-07, 10.55)


def test_primus_pairs_keep_this_iteration_not_the_running_average() -> None:
    """Primus prints X/Y (this iteration / its running mean): X is the record; ANSI colours and
    the [date][rank-63/64][INFO ] prefix do not get in the way."""
    log = read_log(PRIMUS)
    second = log.iterations[1]
    assert "6529.4/156330.0" in PRIMUS.read_text()  # as printed
    assert (second.elapsed_ms, second.tflops_per_gpu, second.tokens_per_s_per_gpu) == (
        6529.4,
        925.1,
        20074.1,
    )
    assert (second.rank, second.timestamp) == (63, "20251115 12:18:00")
    assert (second.device_memory_used_gb, second.device_memory_total_gb) == (126.03, 255.98)
    assert second.device_memory_fraction == pytest.approx(0.4923)
    assert second.other == {"num zeros": 4610863104.0}
    assert log.arguments == {"global_batch_size": "2048", "seq_length": "4096", "world_size": "64"}


def test_primus_steady_state_matches_primus_running_average() -> None:
    """Primus' own running mean at iteration 50 skips iterations 1-2 (6402.7 ms, 943.5
    TFLOP/s/GPU, 20472.8 tokens/s/GPU, arithmetic); ours with warmup=2 agrees, rates
    harmonically averaged (total work / total time, a little below the arithmetic mean)."""
    state = steady_state(read_log(PRIMUS).iterations, warmup=2)
    assert (state.records, state.first_iteration, state.last_iteration) == (48, 3, 50)
    assert state.elapsed_ms == pytest.approx(6402.7, abs=0.05)
    assert state.tflops_per_gpu == pytest.approx(943.5, rel=1e-3)
    assert state.tflops_per_gpu < 943.5
    assert state.tokens_per_s_per_gpu == pytest.approx(20472.8, rel=1e-3)
    assert not state.tokens_derived


def test_rocm_megatron_steady_state_reproduces_rocm_script_summary() -> None:
    """ROCm/Megatron-LM prints no tokens/s: derived from global batch × seq_length /
    world_size / time over iterations 3-9 it equals the ROCm script's own 'tokens/GPU/s:
    1713.367156' printed at the end of the same log; its 'throughput per GPU: 824.93' is the
    arithmetic mean of the same window's TFLOP/s (ours is harmonic); 'mem usages' is a
    fraction; the script's summary lines are not iteration records."""
    log = read_log(ROCM)
    assert len(log.iterations) == 10 and log.iterations[0].device_memory_fraction == 0.6865
    args = log.arguments
    window = [r for r in log.iterations if r.iteration <= 9]
    state = steady_state(
        window, 2, seq_length=int(args["seq_length"]), world_size=int(args["world_size"])
    )
    assert state.tokens_derived and state.tokens_per_s_per_gpu == pytest.approx(1713.367156)
    assert state.tflops_per_gpu == pytest.approx(824.9285714285716, rel=1e-3)
    mem = log.memory[0]
    assert (mem.rank, mem.after_iterations, mem.max_allocated_mb, mem.max_reserved_mb) == (
        0,
        1,
        140046.63720703125,
        171836.0,
    )


def test_memory_reports() -> None:
    """'[Rank R] (after N iterations) memory (MB)' lines, in NVIDIA and Primus logs."""
    mixtral = read_log(MIXTRAL).memory
    assert [(m.rank, m.after_iterations, m.reserved_mb) for m in mixtral] == [(1, 1, 61480.0)]
    late = read_log(D / "megatron_lm_pr5662_memory_report.log")
    assert (late.memory[0].after_iterations, late.memory[0].allocated_mb) == (20, 3270.16)
    assert late.iterations[0].timestamp == "2026-07-10 05:46:31.627699"
    primus = read_log(PRIMUS).memory
    assert [(m.rank, m.max_allocated_mb) for m in primus] == [(0, 111506.17822265625)]


def test_torchrun_prefix_and_other_numeric_fields() -> None:
    """FlagScale's line behind torchrun's '[default0]:' prefix: rank 0; fields the kit does not
    model (MoE load-balancing loss, params norm) are kept in ``other``."""
    record = read_log(D / "flagscale_openseek_default0.log").iterations[0]
    assert (record.rank, record.timestamp, record.tflops_per_gpu) == (
        0,
        "2025-05-27 15:23:07",
        40.4,
    )
    assert record.other == {
        "load_balancing_loss": 1.041994,
        "num zeros": 0.0,
        "params norm": 238.33,
    }


def test_prefixed_and_interleaved_lines_parse_the_same() -> None:
    """Scenario built from real lines: the Megatron-LLM log with every line behind a
    torchrun ('[default7]:') or srun -l ('3: ') prefix and the ROCm log's warnings
    between them parses to the same records."""
    plain = read_log(OLD).iterations
    noise = [ln for ln in ROCM.read_text().splitlines() if "Warning" in ln][:3]
    lines = []
    for i, line in enumerate(OLD.read_text().splitlines()):
        lines += [("[default7]:" if i % 2 else "3: ") + line, *noise]
    mixed = parse_text("\n".join(lines) + "\n", "mixed").iterations
    assert [r.model_dump(exclude={"line", "rank"}) for r in mixed] == [
        r.model_dump(exclude={"line", "rank"}) for r in plain
    ]
    assert {r.rank for r in mixed} == {7, 3}


def test_no_iteration_lines_is_one_clear_error() -> None:
    """A log without iteration lines (here a real rccl-tests log) names the file, one line."""
    other = D.parent / "collectives" / "rccl_all_reduce_mi300x_1node_8gpu.txt"
    with pytest.raises(ValueError, match="no Megatron iteration lines") as info:
        read_log(other)
    assert str(other) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="cannot read"):
        read_log(D / "absent.log")


def test_cut_iteration_line() -> None:
    """A real line cut before its global batch size: an error naming the line, unless it is
    the log's last line with no newline (a writer still writing), which is left out."""
    lines = MIXTRAL.read_text().splitlines()
    cut = lines[2][: lines[2].index("| learning rate")]
    with pytest.raises(ValueError, match=r"mixtral:3: .*without 'global batch size'"):
        parse_text("\n".join([*lines[:2], cut, *lines[3:]]) + "\n", "mixtral")
    partial = parse_text("\n".join([*lines[:2], cut]), "mixtral")
    assert [r.iteration for r in partial.iterations] == [2]


def test_steady_state_needs_iterations_after_warmup() -> None:
    records = read_log(MIXTRAL).iterations
    with pytest.raises(ValueError, match="after the 80 warm-up iterations .*last logged: 73"):
        steady_state(records, 80)
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        steady_state(records, -1)
    state = steady_state(records, 40)  # the Mixtral excerpt: iterations 43-45 and 71-73
    assert state.records == 6 and state.tokens_per_s_per_gpu is None
    assert state.elapsed_ms == pytest.approx(
        (5444.9 + 5533.8 + 5718.6 + 5361.6 + 5470.7 + 5829.9) / 6
    )
