"""The kit's Megatron-Core training driver for ``cpu`` clusters, one process per rank.

``torchrun ... -m pocforge.training.megatron_driver <Megatron-LM arguments>``: the same
arguments the kit gives Megatron-LM's ``pretrain_gpt.py`` on GPU nodes
(``pocforge.frameworks.megatron.megatron_args``), a subset of them, read with Megatron-LM's
names; an argument this driver does not implement is an error, not ignored. It builds
Megatron-Core's ``GPTModel`` with the local (non-Transformer-Engine) layer spec, splits it
with ``parallel_state`` (TP, PP, DP), runs ``get_forward_backward_func``'s schedule (1F1B
for PP > 1) on mock data (random tokens from a fixed pool, so a working optimizer lowers
the loss), and prints every iteration in Megatron-LM's own ``training_log`` format, so the
kit reads this run and a GPU run with one parser (``pocforge.training.megatron_log``).

Not run here (they need Transformer Engine's or CUDA's kernels in megatron-core 0.16.1:
sequence parallelism's norms, recompute's CUDA RNG, CP's attention, MoE layers' CUDA
streams): refused, as the
spec's rules refuse them on ``cpu``. CPU-only on purpose: torch's Adam (Megatron's optimizer wrappers need CUDA), fp32, gloo;
the CUDA assumptions of megatron-core are shimmed in ``megatron_cpu`` (loaded only here).
It also writes ``driver.json`` beside the log: versions, parameter counts, peak host RSS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

POOL = 16  # distinct sequences the mock data cycles through


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pocforge.training.megatron_driver", description=__doc__)
    ints = (
        "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads",
        "num-query-groups", "kv-channels", "seq-length", "max-position-embeddings",
        "tensor-model-parallel-size", "pipeline-model-parallel-size", "micro-batch-size", "global-batch-size", "train-iters", "lr-warmup-iters", "seed",
        "vocab-size", "log-interval", "eval-iters", "eval-interval",
        "profile-step-start", "profile-step-end", "rotary-base", "make-vocab-size-divisible-by",
    )  # fmt: skip
    for name in ints:
        p.add_argument(f"--{name}", type=int)
    floats = ("lr", "min-lr", "weight-decay", "clip-grad", "attention-dropout", "hidden-dropout",
              "rope-scaling-factor", "norm-epsilon")  # fmt: skip
    for name in floats:
        p.add_argument(f"--{name}", type=float)
    choices = {
        "position-embedding-type": ["rope"],
        "normalization": ["RMSNorm", "LayerNorm"],
        "lr-decay-style": ["constant"],
        "tokenizer-type": ["NullTokenizer", "HuggingFaceTokenizer"],
        "transformer-impl": ["local"],
        "distributed-backend": ["gloo"],
    }
    for name, allowed in choices.items():
        p.add_argument(f"--{name}", choices=allowed)
    flags = (
        "group-query-attention", "swiglu", "disable-bias-linear",
        "untie-embeddings-and-output-weights",
        "mock-data", "log-throughput", "use-cpu-initialization",
        "no-gradient-accumulation-fusion", "no-masked-softmax-fusion", "no-bias-swiglu-fusion",
        "no-bias-dropout-fusion", "no-rope-fusion", "no-persist-layer-norm", "use-rope-scaling",
        "finetune", "no-load-optim", "no-load-rng", "exit-on-missing-checkpoint",
    )  # fmt: skip
    for name in flags:
        p.add_argument(f"--{name}", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--use-pytorch-profiler", action="store_true")
    p.add_argument("--profile-ranks", type=int, nargs="+", default=[0])
    p.add_argument("--tensorboard-dir")
    p.add_argument("--tokenizer-model", help="HuggingFaceTokenizer: its folder")
    p.add_argument("--load", help="a Megatron-Core distributed checkpoint to start from")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:
        p.error(
            f"not run by the kit's CPU Megatron driver: {' '.join(unknown)} "
            "(GPU nodes run Megatron-LM's pretrain_gpt.py, which takes them)"
        )
    if not args.mock_data:
        p.error("the CPU driver trains on --mock-data only")
    if (args.tokenizer_type == "HuggingFaceTokenizer") != bool(args.tokenizer_model):
        p.error("--tokenizer-type HuggingFaceTokenizer goes with --tokenizer-model (its folder)")
    if args.load and not (args.finetune or (args.no_load_optim and args.no_load_rng)):
        p.error("the CPU driver loads a checkpoint's model only: add --finetune")
    if args.profile:
        if not args.use_pytorch_profiler:
            p.error("--profile on a CPU needs --use-pytorch-profiler (nsys profiles GPUs)")
        start, end = args.profile_step_start, args.profile_step_end
        if start is None or end is None or not 0 <= start < end:
            p.error("--profile needs --profile-step-start S --profile-step-end E with 0 <= S < E")
        if not args.tensorboard_dir:
            p.error("--profile needs --tensorboard-dir (where Megatron writes its traces)")
    return args


def transformer_config(args: argparse.Namespace):
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=args.num_layers,
        hidden_size=args.hidden_size,
        ffn_hidden_size=args.ffn_hidden_size,
        num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups if args.group_query_attention else None,
        kv_channels=args.kv_channels,
        tensor_model_parallel_size=args.tensor_model_parallel_size or 1,
        pipeline_model_parallel_size=args.pipeline_model_parallel_size or 1,
        gated_linear_unit=args.swiglu,
        activation_func=F.silu if args.swiglu else F.gelu,
        normalization=args.normalization or "LayerNorm",
        layernorm_epsilon=args.norm_epsilon or 1e-5,
        add_bias_linear=not args.disable_bias_linear,
        attention_dropout=args.attention_dropout or 0.0,
        hidden_dropout=args.hidden_dropout or 0.0,
        use_cpu_initialization=True,
        perform_initialization=True,
        params_dtype=torch.float32,
        pipeline_dtype=torch.float32,
        gradient_accumulation_fusion=False,
        masked_softmax_fusion=False,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
    )


def build_model(args: argparse.Namespace, config):
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(normalization=args.normalization or "LayerNorm")
    return GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=args.vocab_size,
        max_sequence_length=args.max_position_embeddings or args.seq_length,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type or "learned_absolute",
        rotary_base=args.rotary_base or 10000,
        rope_scaling=args.use_rope_scaling,
        rope_scaling_factor=args.rope_scaling_factor or 8.0,
    )


def mock_batches(seed: int, tokens: int, seq: int, micro: int, dp_rank: int):
    """The mock data: micro-batches drawn from :data:`POOL` fixed random sequences of
    token ids below ``tokens`` (so a working optimizer lowers the loss), in an order of the
    data-parallel rank's own."""
    import torch

    pool = torch.randint(0, tokens, (POOL, seq), generator=torch.Generator().manual_seed(seed))
    order = torch.Generator().manual_seed(seed + 1 + dp_rank)
    while True:
        yield pool[torch.randint(0, POOL, (micro,), generator=order)]


def vocabulary(args: argparse.Namespace) -> tuple[int, int]:
    """(tokens the data draws from, the embedding's rows): ``--vocab-size`` for the
    ``NullTokenizer``; a Hugging Face tokenizer's length padded as Megatron-LM pads it
    (``_vocab_size_with_padding``: up to a multiple of the divisor × TP)."""
    if args.tokenizer_type != "HuggingFaceTokenizer":
        return args.vocab_size, args.vocab_size
    from transformers import AutoTokenizer

    tokens = len(AutoTokenizer.from_pretrained(args.tokenizer_model))
    multiple = (args.make_vocab_size_divisible_by or 128) * (args.tensor_model_parallel_size or 1)
    return tokens, math.ceil(tokens / multiple) * multiple


def load_checkpoint(model, folder: str) -> int:
    """The model's weights from a Megatron-Core distributed checkpoint (Megatron-LM's
    ``--load`` with ``--finetune``: model only), resharded to this rank's TP/PP slice by
    Megatron-Core; returns the checkpoint's iteration. A missing folder is an error
    (``--exit-on-missing-checkpoint``)."""
    from megatron.core import dist_checkpointing

    tracker = Path(folder) / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        raise SystemExit(f"--load {folder}: no {tracker.name} (not a Megatron checkpoint)")
    mark = tracker.read_text().strip()
    iteration = 0 if mark == "release" else int(mark)
    step = "release" if mark == "release" else f"iter_{iteration:07d}"
    state = dist_checkpointing.load({"model": model.sharded_state_dict()}, str(Path(folder) / step))
    model.load_state_dict(state["model"], strict=True)
    return iteration


def global_name(model, name: str) -> str:
    """A parameter's name with its layer's global number (a pipeline stage numbers its own
    layers from 0; ``TransformerLayer.layer_number`` is global and 1-based)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "decoder" and parts[1] == "layers":
        layer = model.decoder.layers[int(parts[2])]
        parts[2] = str(layer.layer_number - 1)
    return ".".join(parts)


def init_layout_independent(model, args) -> None:
    """Give every parameter the values it would have with one process: the whole tensor is
    drawn from a generator seeded by the parameter's global name, and this rank keeps its
    tensor-parallel slice (Megatron's stacked SwiGLU ``linear_fc1`` holds one slice of the
    gate and one of the up projection). So TP and PP runs start from the same weights as a
    single process and their losses can be compared with it."""
    import zlib

    import torch
    from megatron.core import parallel_state

    tp = parallel_state.get_tensor_model_parallel_world_size()
    rank = parallel_state.get_tensor_model_parallel_rank()
    with torch.no_grad():
        for name, param in model.named_parameters():
            full_name = global_name(model, name)
            gen = torch.Generator().manual_seed(
                (args.seed or 0) * 1_000_003 + zlib.crc32(full_name.encode())
            )
            sharded = getattr(param, "tensor_model_parallel", False) and tp > 1
            dim = getattr(param, "partition_dim", 0) if sharded else 0
            shape = list(param.shape)
            shape[dim] *= tp if sharded else 1
            if param.dim() == 1 and "bias" not in name:  # norm scales
                full = torch.ones(shape)
            elif "bias" in name:
                full = torch.zeros(shape)
            else:
                full = torch.randn(shape, generator=gen) * 0.02
            if not sharded:
                param.copy_(full)
            elif name.endswith("linear_fc1.weight") and args.swiglu:
                gate, up = full.chunk(2, dim=0)
                param.copy_(torch.cat([gate.chunk(tp)[rank], up.chunk(tp)[rank]]))
            else:
                param.copy_(full.chunk(tp, dim=dim)[rank])


def count_parameters(model, args) -> tuple[int, int]:
    """(all parameters, non-embedding parameters) of the whole (dense) model: this rank's,
    tensor-parallel shards summed and replicated ones counted once, over every TP and PP
    rank."""
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    total = embedding = 0
    for name, param in model.named_parameters():
        if not (getattr(param, "tensor_model_parallel", False) or tp_rank == 0):
            continue
        total += param.numel()
        if "embedding" in name or "output_layer" in name:
            embedding += param.numel()
    counts = torch.tensor([total, embedding], dtype=torch.float64)
    dist.all_reduce(counts, group=parallel_state.get_model_parallel_group())
    total, embedding = (int(x) for x in counts.tolist())
    return total, total - embedding


def clip_gradients(model, max_norm: float) -> float:
    """Global gradient norm over the model-parallel ranks (TP shards counted once, as
    Megatron's ``get_grad_norm_fp32``; its multi-tensor kernels need CUDA), then clip."""
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    counted = [
        p.grad
        for p in model.parameters()
        if p.grad is not None and (getattr(p, "tensor_model_parallel", False) or tp_rank == 0)
    ]
    square = torch.zeros((), dtype=torch.float64)
    for grad in counted:
        square += grad.double().pow(2).sum()
    dist.all_reduce(square, group=parallel_state.get_model_parallel_group())
    norm = math.sqrt(float(square))
    if max_norm and norm > max_norm:
        for grad in grads:
            grad.mul_(max_norm / (norm + 1e-6))
    return norm


def average_data_parallel_gradients(model) -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    group = parallel_state.get_data_parallel_group()
    size = dist.get_world_size(group)
    if size == 1:
        return
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, group=group)
            param.grad.div_(size)


def iteration_line(
    iteration: int, args, consumed: int, elapsed_ms: float, tflops: float, loss: float, norm: float
) -> str:
    """One iteration as Megatron-LM's ``training_log`` prints it."""
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return (
        f" [{stamp}] iteration {iteration:8d}/{args.train_iters:8d} |"
        f" consumed samples: {consumed:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
        # Megatron prints .1f; a CPU run needs more digits to be non-zero.
        f" throughput per GPU (TFLOP/s/GPU): {tflops:.6f} |"
        f" learning rate: {args.lr:.6E} |"
        f" global batch size: {args.global_batch_size:5d} |"
        f" lm loss: {loss:.6E} |"
        f" loss scale: 1.0 |"
        f" grad norm: {norm:.3f} |"
        f" number of skipped iterations:   0 |"
        f" number of nan iterations:   0 |"
    )


def start_profiler(args: argparse.Namespace, rank: int, torch):
    """Megatron-LM's torch profiler, on its schedule (``training.py``: started before the
    loop, stepped at the top of each iteration; iterations ``start`` to ``end - 1``
    recorded), on the ranks it names. Its trace goes where the kit's DeepSpeed driver puts
    its own, beside ``--tensorboard-dir`` (``rank<r>.pt.trace.json.gz`` and torch's table).
    Megatron also records Python stacks; not here: torch's Python tracer crashed a
    DeepSpeed rank on this machine (SIGSEGV, 1 run in 2)."""
    if not args.profile or rank not in args.profile_ranks:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    from pocforge.training.driver import export_profile

    start, end = args.profile_step_start, args.profile_step_end
    folder = Path(args.tensorboard_dir).parent
    profiler = profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(
            wait=max(start - 1, 0), warmup=1 if start > 0 else 0, active=end - start, repeat=1
        ),
        on_trace_ready=lambda p: export_profile(p, folder, rank, on_cpu=True),
        record_shapes=True,
    )
    profiler.start()
    return profiler


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from pocforge.training import megatron_cpu

    megatron_cpu.install()
    import megatron.core
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.pipeline_parallel import get_forward_backward_func

    from pocforge import atomic
    from pocforge.training.flops import flops_per_token

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    status = "failed"
    try:
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=args.tensor_model_parallel_size or 1,
            pipeline_model_parallel_size=args.pipeline_model_parallel_size or 1,
        )
        megatron_cpu.seed(args.seed or 0)
        tokens, args.vocab_size = vocabulary(args)
        config = transformer_config(args)
        model = build_model(args, config)
        if args.load:
            load_checkpoint(model, args.load)
        else:
            init_layout_independent(model, args)
        optimizer = torch.optim.Adam(
            model.parameters(), lr=args.lr, weight_decay=args.weight_decay or 0.0
        )
        total_params, active = count_parameters(model, args)
        dp = parallel_state.get_data_parallel_world_size()
        micro, seq = args.micro_batch_size, args.seq_length
        if args.global_batch_size % (micro * dp):
            raise SystemExit(
                f"global batch {args.global_batch_size} is not a multiple of micro batch × dp = {micro * dp}"
            )
        microbatches = args.global_batch_size // (micro * dp)
        positions = torch.arange(seq).unsqueeze(0).expand(micro, seq)
        # Megatron's convention: True is masked. Passed explicitly: its default causal mask
        # is built on "cuda".
        causal = torch.triu(torch.ones(seq, seq), diagonal=1).bool().view(1, 1, seq, seq)

        def forward_step(data_iterator, step_model):
            tokens = next(data_iterator)
            inputs, labels = tokens, torch.roll(tokens, shifts=-1, dims=1)
            output = step_model(inputs, positions, causal, labels=labels)

            def loss_func(per_token):
                loss = per_token.float().mean()
                # clone: the schedule divides the returned loss in place by the micro-batches
                return loss, {"lm loss": loss.detach().clone()}

            return output, loss_func

        fpt = flops_per_token(active, args.hidden_size, args.vocab_size, args.num_layers, seq)
        tokens_per_iteration = args.global_batch_size * seq
        forward_backward = get_forward_backward_func()
        # Every TP and PP rank of one data-parallel replica reads the same batches.
        data = mock_batches(
            args.seed or 0, tokens, seq, micro, parallel_state.get_data_parallel_rank()
        )
        last_rank = rank == world - 1
        profiler = start_profiler(args, rank, torch)
        try:
            for iteration in range(1, args.train_iters + 1):
                if profiler is not None:
                    profiler.step()
                start = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                losses = forward_backward(
                    forward_step_func=forward_step,
                    data_iterator=data,
                    model=[model],
                    num_microbatches=microbatches,
                    seq_length=seq,
                    micro_batch_size=micro,
                    decoder_seq_length=seq,
                    forward_only=False,
                )
                average_data_parallel_gradients(model)
                norm = clip_gradients(model, args.clip_grad or 0.0)
                optimizer.step()
                mean = torch.zeros(())
                if parallel_state.is_pipeline_last_stage():
                    mean = torch.stack([item["lm loss"] for item in losses]).mean()
                    dist.all_reduce(mean, group=parallel_state.get_data_parallel_group())
                    mean /= dp
                elapsed = time.perf_counter() - start
                tflops = tokens_per_iteration * fpt / elapsed / world / 1e12
                if last_rank:
                    consumed = iteration * args.global_batch_size
                    print(
                        iteration_line(
                            iteration, args, consumed, elapsed * 1000, tflops, float(mean), norm
                        ),
                        flush=True,
                    )
            status = "completed"
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            if profiler is not None:
                profiler.stop()
        if last_rank:
            atomic.write_text(
                Path(os.environ.get("POCFORGE_DRIVER_FACTS", "driver.json")),
                json.dumps(
                    {
                        "status": status,
                        "framework_version": f"megatron-core {megatron.core.__version__}",
                        "torch_version": torch.__version__,
                        "parameters": total_params,
                        "active_parameters": active,
                        "flops_per_token": fpt,
                        "world_size": world,
                        "data_parallel": dp,
                        "peak_memory_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                        "peak_memory_kind": "host_rss",
                    },
                    indent=2,
                ),
            )
    finally:
        if dist.is_initialized():
            dist.barrier()
            parallel_state.destroy_model_parallel()
            dist.destroy_process_group()
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
