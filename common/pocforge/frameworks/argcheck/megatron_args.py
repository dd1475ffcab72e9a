"""Check Megatron-LM arguments with Megatron's own code.

Where Megatron-LM is importable (its checkout on ``PYTHONPATH``, as in the ROCm and NGC
training containers): ``megatron.training.arguments.parse_args`` and ``validate_args``, the
functions ``pretrain_gpt.py`` itself calls. Where only Megatron-Core is installed (the
package registry has no Megatron-LM): the layout and model arguments build Megatron-Core's
``TransformerConfig``, whose checks (heads and query groups divisible by TP, sequence
parallel needs TP, MoE and recompute settings) run in its ``__post_init__``.

Input: JSON list of ``{"argv": [...], "world_size": N}``, on a node also ``"entry"`` (the
script the launch runs) and ``"checkout"`` (the Megatron-LM it imports, put on ``sys.path``):
an entry the runtime does not have is refused, as the launch would fail; output: JSON list
of error-or-null.
"""

import argparse
import contextlib
import io
import json
import os
import sys


def check_with_megatron_lm(argv, world_size):
    from megatron.training.arguments import parse_args, validate_args

    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ.setdefault("RANK", "0")
    sys.argv = ["pretrain_gpt.py", *argv]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parse_args()
            validate_args(args, {})
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return lines[-1] if lines else "Megatron-LM's parser exited"
    except (AssertionError, ValueError, RuntimeError) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def _core_parser():
    """The arguments that shape Megatron-Core's TransformerConfig; the rest are ignored."""
    parser = argparse.ArgumentParser(add_help=False)
    for name in (
        "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads",
        "num-query-groups", "kv-channels", "tensor-model-parallel-size",
        "pipeline-model-parallel-size", "context-parallel-size", "expert-model-parallel-size",
        "expert-tensor-parallel-size", "num-experts", "moe-router-topk",
        "moe-ffn-hidden-size", "num-layers-per-virtual-pipeline-stage",
        "recompute-num-layers",
    ):  # fmt: skip
        parser.add_argument(f"--{name}", type=int)
    for name in ("recompute-granularity", "recompute-method", "cp-comm-type"):
        parser.add_argument(f"--{name}")
    for name in ("sequence-parallel", "recompute-activations", "bf16", "fp16"):
        parser.add_argument(f"--{name}", action="store_true")
    return parser


def check_with_megatron_core(argv, world_size):
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig

    args, _ = _core_parser().parse_known_args(argv)
    model_parallel = (
        (args.tensor_model_parallel_size or 1)
        * (args.pipeline_model_parallel_size or 1)
        * (args.context_parallel_size or 1)
    )
    if world_size % model_parallel:
        return f"world size {world_size} is not divisible by tp*pp*cp = {model_parallel}"
    vpp = None
    if args.num_layers_per_virtual_pipeline_stage:
        per_rank = args.num_layers // (args.pipeline_model_parallel_size or 1)
        vpp = per_rank // args.num_layers_per_virtual_pipeline_stage
    granularity = args.recompute_granularity or (
        "selective" if args.recompute_activations else None
    )
    dtype = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32
    try:
        TransformerConfig(
            num_layers=args.num_layers,
            hidden_size=args.hidden_size,
            ffn_hidden_size=args.ffn_hidden_size,
            num_attention_heads=args.num_attention_heads,
            num_query_groups=args.num_query_groups,
            kv_channels=args.kv_channels,
            tensor_model_parallel_size=args.tensor_model_parallel_size or 1,
            pipeline_model_parallel_size=args.pipeline_model_parallel_size or 1,
            virtual_pipeline_model_parallel_size=vpp,
            context_parallel_size=args.context_parallel_size or 1,
            cp_comm_type=args.cp_comm_type,
            expert_model_parallel_size=args.expert_model_parallel_size or 1,
            expert_tensor_parallel_size=args.expert_tensor_parallel_size,
            num_moe_experts=args.num_experts,
            moe_router_topk=args.moe_router_topk or 2,
            moe_ffn_hidden_size=args.moe_ffn_hidden_size,
            sequence_parallel=args.sequence_parallel,
            recompute_granularity=granularity,
            recompute_method=args.recompute_method,
            recompute_num_layers=args.recompute_num_layers,
            bf16=args.bf16,
            fp16=args.fp16,
            params_dtype=dtype,
            pipeline_dtype=dtype,
        )
    except (AssertionError, ValueError, TypeError) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def missing_entry(item):
    """Why the launch cannot start in this runtime (None: its entry script is here)."""
    entry = item.get("entry")
    if entry is None or os.path.isfile(entry):
        return None
    return (
        f"{entry} is not in this runtime: set training.megatron.path to where its image "
        "keeps the checkout"
    )


def main() -> None:
    items = json.load(sys.stdin)
    # every checkout before the first import: a `megatron` package imported from
    # Megatron-Core's install would not see a checkout added after it
    for item in items:
        checkout = item.get("checkout")
        if checkout and os.path.isdir(checkout) and checkout not in sys.path:
            sys.path.insert(0, checkout)
    try:
        import megatron.training.arguments  # noqa: F401

        check = check_with_megatron_lm
    except ImportError:
        check = check_with_megatron_core
    results = [missing_entry(item) or check(item["argv"], item["world_size"]) for item in items]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
