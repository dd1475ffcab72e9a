"""The spec's kernel ops and the kernel library's bench cases stay in step.

A POC names kernels by the spec's op names (``pocforge.spec.kernels_schema.KERNEL_OPS``); the
runner hands those names to ``python -m pocforge_kernels.bench --op``, and acceptance
criteria (``kernels.<op>.<metric>``) look rows up by them.  So every spec op needs a
bench case, and every bench case must answer to a spec op.
"""

import json
from pathlib import Path

import torch

from pocforge.spec.kernels_schema import KERNEL_OPS
from pocforge_kernels import OPS, op_folders
from pocforge_kernels.bench.harness import MODELS, load_models
from pocforge_kernels.bench.registry import ROOT, cases, compile_variants


def _bench_modules():
    import importlib

    return {
        folder: importlib.import_module(f"pocforge_kernels.{folder}.bench")
        for folder in op_folders()
        if (ROOT / folder / "bench.py").is_file()
    }


def test_every_spec_op_has_a_bench_case_and_every_case_is_a_spec_op():
    assert set(cases()) == set(KERNEL_OPS)
    for folder, module in _bench_modules().items():
        assert module.CASES, folder
        assert set(module.CASES) <= set(KERNEL_OPS), folder
        for op, builders in module.CASES.items():
            assert builders and all(callable(b) for b in builders), (folder, op)


def test_every_op_folder_carries_its_bench():
    """One benchmark per op folder, beside its ref.py, kernel.py and op.py (Liger-Kernel)."""
    assert set(_bench_modules()) == set(op_folders())
    assert set(op_folders()) == {target.split(":")[0] for target in OPS.values()}


def test_models_json_names_the_bench_ops_and_real_models():
    spec = load_models()
    assert list(spec["ops"]) == list(cases())  # same ops, in the registry's order
    for op, models in spec["ops"].items():
        assert models and set(models) <= set(spec["models"]), op
    assert set(spec["cpu_ops"]) <= set(cases())
    assert json.loads(Path(MODELS).read_text()) == spec


def test_compile_variants_belong_to_their_folders_ops():
    variants = compile_variants()
    assert len(variants) == 8
    for name in variants:
        assert name.split()[0] in cases(), name


def test_per_block_quant_runs_only_where_the_model_ships_block_scales():
    """fp8_quant's per-block case is for block-scaled fp8 weights (DeepSeek-V3); at Llama the
    builder declines before allocating anything."""
    from pocforge_kernels.fp8_quant.bench import per_block

    spec = load_models()
    llama = spec["models"]["llama-3-8b"]
    assert per_block(llama, spec["workloads"]["gpu"], torch.device("cpu"), torch.bfloat16) is None
    assert spec["models"]["deepseek-v3"]["fp8_block_scales"]


def test_the_cli_offers_exactly_the_bench_ops():
    from pocforge.cli.kernels import compile_cmd, kernels_cmd

    for command in (kernels_cmd, compile_cmd):
        (op,) = [p for p in command.params if p.name == "ops"]
        assert set(op.type.choices) == set(cases()), command.name
