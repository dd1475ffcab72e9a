"""The compile check: every kernel compiled by Triton's real backends for gfx942, gfx950, sm90
and sm100, on this CPU machine (no GPU involved), and its failures reported, not raised.

It runs in a child process without TRITON_INTERPRET (the interpreter replaces the compiler)
and with a fresh Triton cache, so each run really compiles.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARCHS = {"gfx942", "gfx950", "sm90", "sm100"}
POCFORGE = str(Path(sys.executable).parent / "pocforge")
# The whole check (every op for every target, 70 s here) and the broken configs' (27 and
# 6 s beside another test) are integration tests: `make test` and `make test-kernels` run
# them, `make test-fast` keeps the quick compile below (one op on one target, twice).
WHOLE = pytest.mark.integration


def _compiler_env(tmp_path, **extra) -> dict:
    """The environment minus the interpreter, with a Triton cache of the test's own."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return env | {"TRITON_CACHE_DIR": str(tmp_path / "triton-cache")} | extra


def _compile_check(tmp_path, *args, env_extra=None):
    env = _compiler_env(tmp_path, TRITON_DEFAULT_FP_FUSION="1", **(env_extra or {}))
    out = tmp_path / "compile.json"
    proc = subprocess.run(
        [POCFORGE, "kernels", "compile", f"--json={out}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    result = json.loads(out.read_text()) if out.exists() else None
    return proc, result


@pytest.fixture(scope="module")
def full_check(tmp_path_factory):
    return _compile_check(tmp_path_factory.mktemp("compile-check"))


@WHOLE
def test_every_kernel_compiles_and_fits_on_every_target(full_check):
    proc, result = full_check
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert result["ok"] and not result["errors"] and not result["not_compiled"]
    assert result["schema"] == "pocforge_kernels.compile_check/1"
    assert set(result["targets"]) == ARCHS
    from pocforge_kernels.bench.registry import cases

    # Every op's bench cases (<op>/bench.py) reached the compiler, the new ones included.
    assert {r["case"].split()[0] for r in result["records"]} == set(cases())
    from pocforge_kernels.compile_check.launches import library_kernels

    kernels = library_kernels()
    assert len(kernels) >= 14
    for arch in ARCHS:
        records = [r for r in result["records"] if r["arch"] == arch]
        assert {r["kernel"] for r in records} == kernels, arch
        for r in records:
            # The compiler's own figures were read back for every variant.
            assert r["status"] == "ok" and r["error"] is None
            assert r["registers"] and r["registers"] > 0, r
            assert 0 <= r["shared_bytes"] <= r["shared_limit"], r
    assert "all compiled and fit" in proc.stdout


@WHOLE
def test_every_shipped_bucket_is_compiled(full_check):
    """Not only the bucket the benchmark shape selects: each config entry of each arch file."""
    from pocforge_kernels import config

    _, result = full_check
    checked = set(result["configs_checked"])
    for path in config.KERNELS_ROOT.glob("*/configs/*.json"):
        arch, op = path.stem, path.parent.parent.name
        if arch not in ARCHS:
            continue  # default.json: checked through sm100, which has no file of its own
        for bucket in config.load_table(op, arch)["configs"]:
            assert f"{arch} {op}/configs/{arch}.json[{bucket}]" in checked
    for bucket in config.load_table("fused_moe", "default")["configs"]:
        assert f"sm100 fused_moe/configs/default.json[{bucket}]" in checked


@WHOLE
def test_tensor_core_kernels_compile_for_gfx950(full_check):
    """Regression: naming input_precision="tf32" for bf16 tl.dot broke every attention and
    MoE kernel on gfx950 (MI355X), which accepts only ieee/bf16x3/bf16x6."""
    _, result = full_check
    on_gfx950 = {r["kernel"] for r in result["records"] if r["arch"] == "gfx950"}
    assert {
        "flash_attention_prefill_kernel",
        "paged_attention_decode_kernel",
        "moe_grouped_gemm_kernel",
        "mla_decode_kernel",
    } <= on_gfx950


def _write_config(folder, op, arch, size_key, configs):
    (folder / op).mkdir(parents=True, exist_ok=True)
    table = {"op": op, "size_key": size_key, "provenance": "test", "configs": configs}
    (folder / op / f"{arch}.json").write_text(json.dumps(table))


def _refused(tmp_path, op: str, arch: str, size_key: str, configs: dict) -> tuple[list, str]:
    """A config the compiler must refuse, compiled for its op and target alone (the configs
    of the ops and targets an override folder does not name stay shipped:
    tests/kernels/test_config.py): the check's records and its output."""
    overrides = tmp_path / "configs"
    _write_config(overrides, op, arch, size_key, configs)
    proc, result = _compile_check(
        tmp_path,
        f"--arch={arch}",
        f"--op={op}",
        env_extra={"POCFORGE_KERNELS_CONFIG_DIR": str(overrides)},
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not result["ok"] and "FAILED" in proc.stdout
    return result["records"], proc.stdout


@WHOLE
def test_tiles_too_big_for_mi300xs_lds_fail_with_the_config_named(tmp_path):
    # blocks of 256 keys: 128 KiB of LDS by the compiler's count, where MI300X has 64 (a
    # narrow BLOCK_M keeps the compile short: 256 x 256 took twice as long to refuse)
    configs = {"256": {"BLOCK_M": 16, "BLOCK_N": 256, "num_warps": 4, "num_stages": 2}}
    records, out = _refused(tmp_path, "flash_attention_prefill", "gfx942", "head_dim", configs)
    over = [r for r in records if r["status"] == "over shared limit"]
    assert over and all(r["shared_bytes"] > 64 * 1024 == r["shared_limit"] for r in over)
    config = tmp_path / "configs" / "flash_attention_prefill" / "gfx942.json"
    assert str(config) in over[0]["config"]
    assert "over shared limit" in out


@WHOLE
def test_a_block_size_triton_cannot_compile_fails_with_the_error(tmp_path):
    configs = {"65536": {"BLOCK": 3000, "TILE": 3000, "num_warps": 4, "bwd_programs_per_unit": 4}}
    records, _ = _refused(tmp_path, "rms_norm", "sm90", "hidden_size", configs)
    broken = [r for r in records if r["status"] == "compile error"]
    assert {r["kernel"] for r in broken} == {"rms_norm_fwd_kernel", "rms_norm_bwd_kernel"}
    assert "power of 2" in broken[0]["error"] or "power of two" in broken[0]["error"]


def test_refuses_to_run_under_the_interpreter(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pocforge_kernels.compile_check", "--arch=sm90", "--op=rms_norm"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "unset TRITON_INTERPRET" in proc.stderr


def test_two_checks_in_one_process_each_compile_their_own(tmp_path):
    """Triton caches a compile function per kernel and device: a second check in the same
    process (fp16 after bf16) must still compile and record its own variants."""
    code = (
        "import torch\n"
        "from pocforge_kernels.compile_check import compile_all\n"
        "runs = [compile_all(['sm90'], ['silu_and_mul'], d) for d in (torch.bfloat16, torch.float16)]\n"
        "print([len(r['records']) for r in runs], all(r['ok'] for r in runs))\n"
    )
    env = _compiler_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts, ok = proc.stdout.strip().rsplit("] ", 1)
    first, second = (int(n) for n in counts.strip("[").split(","))
    assert first == second > 0 and ok == "True"


def test_cli_arch_choices_match_the_targets():
    """The CLI lists the architectures without importing triton; they must stay the same."""
    from pocforge.cli.kernels import ARCHS as CLI_ARCHS
    from pocforge_kernels.compile_check.targets import TARGETS

    assert list(TARGETS) == CLI_ARCHS and set(TARGETS) == ARCHS


def test_targets_are_the_device_facts_in_tritons_terms():
    """Limits come from devices.yaml (one home for hardware facts), named as Triton names them."""
    from pocforge_kernels import devices
    from pocforge_kernels.compile_check.targets import TARGETS

    assert {a: (t.backend, t.triton_arch, t.warp_size) for a, t in TARGETS.items()} == {
        "gfx942": ("hip", "gfx942", 64),
        "gfx950": ("hip", "gfx950", 64),
        "sm90": ("cuda", 90, 32),
        "sm100": ("cuda", 100, 32),
    }
    for name, arch in devices.archs().items():
        assert TARGETS[name].shared_limit == arch.shared_bytes
        assert TARGETS[name].source == arch.source
