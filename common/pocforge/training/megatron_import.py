"""A Hugging Face Llama checkpoint as a Megatron-Core distributed checkpoint, for the
kit's CPU Megatron driver.

``python -m pocforge.training.megatron_import import --hf-model DIR --megatron-path OUT
[--torch-dtype float32]``: the arguments of Megatron-Bridge's
``examples/conversion/convert_checkpoints.py import``, which GPU nodes run
(:mod:`pocforge.frameworks.megatron_init`). Megatron-Bridge itself needs Transformer
Engine's CUDA build, so a ``cpu`` cluster runs this instead: it builds Megatron-Core's
``GPTModel`` (the CPU driver's local layers) from the checkpoint's ``config.json``, fills it
from the safetensors files, and saves its ``sharded_state_dict`` with Megatron-Core's own
``dist_checkpointing`` in the layout ``--load`` reads (``iter_0000000/`` and
``latest_checkpointed_iteration.txt``), so the trainer loads it at any TP/PP.

The weight mapping is Megatron-Bridge's for Llama (``models/llama/llama_bridge.py``):
q, k and v merged per query group (``merge_qkv_weights``: each group's query heads, then its
key, then its value), gate and up stacked into ``linear_fc1``. Dense Llama-architecture
models only; any other tensor is refused by name. The folder is written beside the target
and renamed into place, so a half-written one is never taken for a checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ITERATION_DIR = "iter_0000000"
TRACKER = "latest_checkpointed_iteration.txt"
DTYPES = ("float32", "float16", "bfloat16")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pocforge.training.megatron_import", description=__doc__)
    commands = p.add_subparsers(dest="command", required=True)
    one = commands.add_parser("import", help="Hugging Face -> Megatron-Core")
    one.add_argument("--hf-model", required=True, type=Path, help="the Hugging Face folder")
    one.add_argument("--megatron-path", required=True, type=Path, help="where to write it")
    one.add_argument("--torch-dtype", choices=DTYPES, default="float32")
    return p


def megatron_argv(config: dict) -> list[str]:
    """The CPU driver's model arguments for a Llama ``config.json``: the ones the kit
    gives the trainer (:func:`pocforge.frameworks.megatron.model_args`)."""
    from pocforge.catalog.model_facts import facts_from_config
    from pocforge.frameworks.megatron import model_args

    facts = facts_from_config(config)
    return [
        *model_args(facts, seq_len=facts.max_position or 2048),
        "--vocab-size", str(facts.vocab),
        "--transformer-impl", "local",
    ]  # fmt: skip


def hf_tensors(folder: Path) -> dict:
    """Every tensor of the checkpoint's safetensors files, by name."""
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{folder}: no *.safetensors files (a Hugging Face checkpoint folder?)")
    tensors: dict = {}
    for file in files:
        tensors.update(load_file(str(file)))
    return tensors


def merge_qkv(q, k, v, heads: int, groups: int):
    """Megatron's fused QKV: per query group, its query heads, then its key and value."""
    import torch

    head_dim = q.shape[0] // heads
    hidden = q.shape[1]
    q = q.view(groups, heads // groups, head_dim, hidden)
    k = k.view(groups, 1, head_dim, hidden)
    v = v.view(groups, 1, head_dim, hidden)
    return torch.cat([q, k, v], dim=1).reshape(-1, hidden)


def megatron_state(tensors: dict, config: dict) -> dict:
    """The HF tensors under Megatron-Core's names (local layers). Consumes ``tensors``;
    anything left over has no place in the model and is refused by name."""
    import torch

    heads = config["num_attention_heads"]
    groups = config.get("num_key_value_heads") or heads
    out = {"embedding.word_embeddings.weight": tensors.pop("model.embed_tokens.weight")}
    for layer in range(config["num_hidden_layers"]):
        hf, mc = f"model.layers.{layer}.", f"decoder.layers.{layer}."
        q, k, v = (tensors.pop(f"{hf}self_attn.{x}_proj.weight") for x in "qkv")
        gate, up = tensors.pop(f"{hf}mlp.gate_proj.weight"), tensors.pop(f"{hf}mlp.up_proj.weight")
        out |= {
            f"{mc}input_layernorm.weight": tensors.pop(f"{hf}input_layernorm.weight"),
            f"{mc}self_attention.linear_qkv.weight": merge_qkv(q, k, v, heads, groups),
            f"{mc}self_attention.linear_proj.weight": tensors.pop(f"{hf}self_attn.o_proj.weight"),
            f"{mc}pre_mlp_layernorm.weight": tensors.pop(f"{hf}post_attention_layernorm.weight"),
            f"{mc}mlp.linear_fc1.weight": torch.cat([gate, up]),
            f"{mc}mlp.linear_fc2.weight": tensors.pop(f"{hf}mlp.down_proj.weight"),
        }
    out["decoder.final_layernorm.weight"] = tensors.pop("model.norm.weight")
    if not config.get("tie_word_embeddings", False):
        out["output_layer.weight"] = tensors.pop("lm_head.weight")
    tensors.pop("lm_head.weight", None)  # a tied head saved anyway is the embedding
    if tensors:
        raise SystemExit(
            f"no Megatron place for {', '.join(sorted(tensors)[:5])}: the kit's importer takes "
            "dense Llama-architecture checkpoints (GPU nodes run Megatron-Bridge's)"
        )
    return out


def convert(hf_model: Path, megatron_path: Path, dtype: str) -> None:
    import torch
    import torch.distributed as dist

    from pocforge.training import megatron_cpu, megatron_driver

    config_file = hf_model / "config.json"
    if not config_file.is_file():
        raise SystemExit(f"{hf_model}: no config.json (a Hugging Face checkpoint folder?)")
    config = json.loads(config_file.read_text())
    if config.get("model_type") not in ("llama", "mistral", "qwen2") or config.get(
        "attention_bias"
    ):
        raise SystemExit(
            f"{config_file}: model_type {config.get('model_type')!r}; the kit's importer takes "
            "dense Llama-architecture checkpoints without attention biases"
        )
    if dtype != "float32":
        raise SystemExit(f"--torch-dtype {dtype}: the kit's CPU driver trains float32")
    megatron_cpu.install()
    from megatron.core import dist_checkpointing, parallel_state

    partial = megatron_path.with_name(megatron_path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / ITERATION_DIR).mkdir(parents=True)
    store = partial / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        parallel_state.initialize_model_parallel(1, 1)
        megatron_cpu.seed(0)
        args = megatron_driver.parser().parse_args(megatron_argv(config))
        model = megatron_driver.build_model(args, megatron_driver.transformer_config(args))
        state = megatron_state(hf_tensors(hf_model), config)
        result = model.load_state_dict(
            {name: tensor.to(getattr(torch, dtype)) for name, tensor in state.items()},
            strict=False,
        )
        missing = [name for name in result.missing_keys if not name.endswith("_extra_state")]
        if missing or result.unexpected_keys:
            raise SystemExit(
                f"the checkpoint does not fill the model: missing {missing}, "
                f"unexpected {result.unexpected_keys}"
            )
        dist_checkpointing.save(
            {"model": model.sharded_state_dict(), "iteration": 0, "checkpoint_version": 3.0},
            str(partial / ITERATION_DIR),
        )
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    store.unlink(missing_ok=True)
    (partial / TRACKER).write_text("0")
    shutil.rmtree(megatron_path, ignore_errors=True)
    os.replace(partial, megatron_path)
    print(f"imported {hf_model} -> {megatron_path} ({dtype})", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    convert(args.hf_model, args.megatron_path, args.torch_dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
