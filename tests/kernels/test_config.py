"""Launch configs are data: a file per op and architecture, each with the keys its launcher reads."""

import json

import pytest

from pocforge_kernels import arch, config

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


def _clear_cache():
    config.load_table.cache_clear()


def test_override_folder_wins_over_the_shipped_file(tmp_path, monkeypatch):
    """POCFORGE_KERNELS_CONFIG_DIR: try configs on site without editing the kit."""
    (tmp_path / "rms_norm").mkdir()
    table = {"op": "rms_norm", "size_key": "hidden_size", "provenance": "a tuning try"}
    table["configs"] = {"4096": {"BLOCK": 2048, "TILE": 2048, "num_warps": 4}}
    (tmp_path / "rms_norm" / "sm90.json").write_text(json.dumps(table))
    monkeypatch.setenv(config.CONFIG_DIR_ENV, str(tmp_path))
    _clear_cache()
    try:
        assert config.config_path("rms_norm", "sm90") == tmp_path / "rms_norm" / "sm90.json"
        assert config.launch_config("rms_norm", 4096, arch="sm90")["BLOCK"] == 2048
        # Ops and arches the folder does not name keep the shipped files.
        shipped = config.KERNELS_ROOT / "rms_norm" / "configs" / "gfx942.json"
        assert config.config_path("rms_norm", "gfx942") == shipped
    finally:
        monkeypatch.delenv(config.CONFIG_DIR_ENV)
        _clear_cache()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"configs": {}}', "no 'configs' entries"),
        ('{"size_key": "T", "configs": {"big": {"BLOCK_M": 64}}}', "bucket keys must be whole"),
    ],
)
def test_bad_override_names_the_file(tmp_path, monkeypatch, text, message):
    (tmp_path / "fused_moe").mkdir()
    bad = tmp_path / "fused_moe" / "sm90.json"
    bad.write_text(text)
    monkeypatch.setenv(config.CONFIG_DIR_ENV, str(tmp_path))
    _clear_cache()
    try:
        with pytest.raises(ValueError, match=message) as err:
            config.launch_config("fused_moe", 64, arch="sm90")
        assert str(bad) in str(err.value)
    finally:
        monkeypatch.delenv(config.CONFIG_DIR_ENV)
        _clear_cache()
