"""The benchmark harness: correctness-only on a CPU, roofline maths, device matching, CLI."""

import json

import pytest

from pocforge_kernels.bench import __main__ as cli
from pocforge_kernels.bench import run_benchmarks
from pocforge_kernels.bench.roofline import Roofline
from pocforge_kernels.devices import match_gpu


def test_cpu_run_checks_correctness_and_reports_no_timing():
    """On a CPU every row is checked against its reference and carries no time at all."""
    result = run_benchmarks(["rms_norm", "fused_moe"])
    assert result["timed"] is False and "no timing" in result["note"]
    assert [row["op"] for row in result["rows"]] == ["rms_norm", "fused_moe"]
    for row in result["rows"]:
        assert row["correct"], row
        assert not {"median_ms", "gbps", "tflops", "roofline_pct"} & set(row)
    assert result["rows"][0]["dims"] == {"T": 3, "H": 128}  # workloads.cpu x cpu-check
    assert set(result["metrics"]) >= {"median_ms", "roofline_pct", "vs_torch", "peers"}
    assert result["metadata"]["versions"]["torch"]


def test_unknown_op_is_refused():
    with pytest.raises(ValueError, match="unknown op"):
        run_benchmarks(["softmax"])


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H200", "H200"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI325X", "MI325X"),
        ("NVIDIA GeForce RTX 4090", None),
        ("cpu", "cpu"),
    ],
)
def test_device_names_match_the_catalog(name, key):
    assert match_gpu(name) == key


def test_roofline_picks_the_binding_resource():
    """MI300X: 5.3 TB/s, 1307.4 bf16 TFLOP/s (devices.yaml)."""
    mi300x = Roofline.for_device("MI300X")
    seconds, bound = mi300x.floor(5.3e12, 1.0, "bf16")
    assert bound == "memory" and seconds == pytest.approx(1.0)
    seconds, bound = mi300x.floor(1.0, 2 * 1307.4e12, "bf16")
    assert bound == "compute" and seconds == pytest.approx(2.0)
    assert Roofline.for_device("cpu") is None  # no roofline applies to the CPU


def test_command_line_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["--op", "silu_and_mul", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["schema"] == "pocforge_kernels.bench/2"
    assert written["rows"][0]["op"] == "silu_and_mul"
    assert "no timing" in capsys.readouterr().out.replace("\n", " ")


def test_timed_row_arithmetic(monkeypatch):
    """The GPU path's row maths, with do_bench replaced by known times (no GPU here):
    2 ms for the kernel, 6 ms for the reference, on H200's roofline."""
    import torch

    from pocforge_kernels.bench import harness
    from pocforge_kernels.rms_norm.bench import rms_norm

    spec = harness.load_models()
    case = rms_norm(
        spec["models"]["cpu-check"], spec["workloads"]["cpu"], torch.device("cpu"), torch.bfloat16
    )
    monkeypatch.setattr(harness, "_time_ms", lambda fn: 2.0 if fn is case.kernel else 6.0)
    h200 = Roofline.for_device("H200")
    row = harness.run_case(case, "cpu-check", h200, timed=True)
    assert row["correct"] and row["median_ms"] == 2.0
    assert row["gbps"] == pytest.approx(case.nbytes / 2e-3 / 1e9)
    assert row["tflops"] == pytest.approx(case.flops / 2e-3 / 1e12)
    floor, bound = h200.floor(case.nbytes, case.flops, "bf16")
    assert bound == "memory" and row["bound"] == "memory"
    assert row["roofline_pct"] == pytest.approx(100 * floor / 2e-3)
    assert row["vs_torch"] == pytest.approx(3.0)
    # Every peer that agrees with the reference is timed like the reference: 6 ms / 2 ms.
    assert row["peers"]["torch F.rms_norm"]["agrees"]
    for name, peer in row["peers"].items():
        if peer.get("agrees"):
            assert peer["speedup"] == pytest.approx(3.0), name


def test_peers_that_disagree_or_fail_are_reported_not_timed(monkeypatch):
    import torch

    from pocforge_kernels.bench import harness
    from pocforge_kernels.bench.case import Case

    x = torch.randn(4, 64)
    timed = []
    monkeypatch.setattr(harness, "_time_ms", lambda fn: timed.append(fn) or 1.0)
    case = Case(
        "double",
        "N=256",
        {"N": 256},
        kernel=lambda: x * 2,
        reference=lambda: x + x,
        nbytes=2 * x.numel() * 4,
        flops=x.numel(),
        tolerance_dtype=torch.float32,
        peers={"same": lambda: 2 * x, "wrong": lambda: x * 3, "broken": lambda: 1 / 0},
    )
    row = harness.run_case(case, "m", None, timed=True)
    assert row["correct"] and row["peers"]["same"] == {
        "rel_error": 0.0,
        "agrees": True,
        "speedup": 1.0,
    }
    assert row["peers"]["wrong"]["agrees"] is False and "speedup" not in row["peers"]["wrong"]
    assert row["peers"]["broken"]["error"].startswith("ZeroDivisionError")
    assert case.peers["wrong"] not in timed and case.peers["same"] in timed


def test_cpu_run_checks_the_torch_peers_against_the_reference():
    """SDPA, _scaled_mm and the _grouped_mm MoE compute the same thing as the kit's kernels (so a GPU ratio compares
    like with like); checked here on the CPU, where both exist."""
    result = run_benchmarks(["flash_attention_prefill", "fp8_gemm", "fused_moe"])
    peers = {(row["op"], row["model"]): row.get("peers", {}) for row in result["rows"]}
    assert peers[("flash_attention_prefill", "cpu-check")]["torch SDPA"]["agrees"]
    assert peers[("fp8_gemm", "cpu-check-per-channel")]["torch _scaled_mm"]["agrees"]
    assert peers[("fp8_gemm", "cpu-check")] == {}  # block scales: _scaled_mm has no such mode
    assert peers[("fused_moe", "cpu-check")]["torch _grouped_mm"]["agrees"]


def test_every_row_carries_its_shape_as_integer_dims():
    """``dims`` says in integers what ``shape`` says in words: every ``K=<int>`` of the text is
    in ``dims`` with the same value, so the kit never parses the text."""
    result = run_benchmarks()
    assert {row["op"] for row in result["rows"]} >= {"fp8_quant", "gelu_and_mul"}
    for row in result["rows"]:
        assert row["correct"], row
        dims = row["dims"]
        assert dims and all(type(v) is int and v > 0 for v in dims.values()), row
        said = dict(part.split("=", 1) for part in row["shape"].split() if "=" in part)
        for key, value in said.items():
            if value.isdigit():
                assert dims[key] == int(value), row
    json.dumps(result)  # the document stays JSON-ready
