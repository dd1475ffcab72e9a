"""Launch configs are data: a file per op and architecture, each with the keys its launcher reads."""

import json

import pytest

from pocforge.kernels import arch, config

ARCHS = ("default", "gfx942", "gfx950", "sm90")
OP_FOLDERS = sorted(
    p.parent.parent.name for p in config.KERNELS_ROOT.glob("*/configs/default.json")
)


def test_every_op_folder_has_configs():
    expected = {
        "rms_norm",
        "rotary_embedding",
        "act_and_mul",
        "fp8_quant",
        "fp8_gemm",
        "flash_attention_prefill",
        "paged_attention_decode",
        "fused_moe",
        "mla_decode",
    }
    assert set(OP_FOLDERS) == expected


@pytest.mark.parametrize("op", OP_FOLDERS)
def test_config_files_are_complete_and_consistent(op):
    """Each arch file names its op, says where its numbers come from and has default's keys."""
    folder = config.KERNELS_ROOT / op / "configs"
    default_keys = None
    for name in ARCHS:
        table = json.loads((folder / f"{name}.json").read_text())
        assert table["op"] == op and table["size_key"] and table["provenance"]
        for bucket, params in table["configs"].items():
            int(bucket)  # bucket keys are problem-size upper bounds
            default_keys = default_keys or set(params)
            assert set(params) == default_keys, f"{name}.json bucket {bucket}"


def test_bucket_is_the_smallest_key_at_or_above_the_size():
    assert config.launch_config("rms_norm", 1000, arch="sm90")["BLOCK"] == 1024
    assert config.launch_config("rms_norm", 1025, arch="sm90")["BLOCK"] == 4096
    assert config.launch_config("rms_norm", 10**6, arch="sm90")["BLOCK"] == 8192  # the largest


def test_unknown_arch_falls_back_to_default():
    want = config.launch_config("fused_moe", 7, arch="default")
    assert config.launch_config("fused_moe", 7, arch="gfx1100") == want


def test_arch_override_and_cpu_detection(monkeypatch):
    monkeypatch.setenv(arch.ARCH_ENV, "gfx950")
    assert arch.current_arch() == "gfx950"
    monkeypatch.delenv(arch.ARCH_ENV)
    assert arch.current_arch("cpu") == "cpu"
