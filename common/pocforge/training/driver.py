"""The per-rank training benchmark, launched by torchrun or the deepspeed launcher.

``python -m pocforge.training.driver --config run.json``: builds the model (a local model
folder's config, or the spec's model facts) with random weights, trains it under DeepSpeed
for the configured steps on a fixed pool of random sequences (so a working optimizer
visibly lowers the loss), times every optimizer step, and has rank 0 write
``summary.json``. It always ends with a barrier and ``destroy_process_group``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from pocforge import atomic
from pocforge.training.flops import count_parameters, flops_per_token
from pocforge.training.summary import StepRecord, TrainingSummary, definitions

POOL = 16  # distinct sequences the data loader cycles through


def build_config(cfg: dict):
    """The model's HF config: a local folder's, or one built from the spec's facts."""
    from transformers import AutoConfig, LlamaConfig

    path = cfg["model"].get("path")
    if path and (Path(path) / "config.json").is_file():
        config = AutoConfig.from_pretrained(path)
    else:
        facts = cfg["model"]["facts"]
        config = LlamaConfig(
            hidden_size=facts["hidden"],
            intermediate_size=facts["intermediate"],
            num_hidden_layers=facts["layers"],
            num_attention_heads=facts["heads"],
            num_key_value_heads=facts.get("kv_heads") or facts["heads"],
            vocab_size=facts["vocab"],
            max_position_embeddings=max(cfg["seq_len"], facts.get("max_position") or 0),
        )
    config.use_cache = False
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    cfg = json.loads(args.config.read_text())

    import deepspeed
    import torch
    import torch.distributed as dist
    from deepspeed.accelerator import get_accelerator

    accel = get_accelerator()
    on_cpu = accel.device_name() == "cpu"
    deepspeed.init_distributed(
        dist_backend="gloo" if on_cpu else accel.communication_backend_name()
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not on_cpu:
        accel.set_device(local_rank)
    device = torch.device(accel.device_name(local_rank) if not on_cpu else "cpu")
    ds_config = cfg["ds_config"]
    status, records = "failed", []
    try:
        # transformers is imported before zero.Init: ZeRO-3 patches tensor construction, and
        # transformers' lazy imports trip over the patched signature.
        from transformers import AutoModelForCausalLM

        config = build_config(cfg)
        torch.manual_seed(cfg.get("seed", 0))
        with deepspeed.zero.Init(
            config_dict_or_path=ds_config, enabled=ds_config["zero_optimization"]["stage"] == 3
        ):
            model = AutoModelForCausalLM.from_config(config)
        total_params, active = count_parameters(model)
        engine, *_ = deepspeed.initialize(
            model=model,
            model_parameters=[p for p in model.parameters() if p.requires_grad],
            config=ds_config,
        )

        micro, accum, seq = cfg["micro_batch"], cfg["grad_accum"], cfg["seq_len"]
        vocab = model.config.vocab_size
        gen = torch.Generator().manual_seed(cfg.get("seed", 0))
        pool = torch.randint(0, vocab, (POOL, seq), generator=gen)
        order = torch.Generator().manual_seed(cfg.get("seed", 0) + 1 + rank)
        try:
            for step in range(cfg["steps"]):
                accel.synchronize()
                start = time.perf_counter()
                losses = []
                for _ in range(accum):
                    batch = pool[torch.randint(0, POOL, (micro,), generator=order)].to(device)
                    loss = engine(input_ids=batch, labels=batch).loss
                    engine.backward(loss)
                    engine.step()
                    losses.append(loss.detach().float())
                accel.synchronize()
                seconds = time.perf_counter() - start
                mean = torch.stack(losses).mean().to(device)
                dist.all_reduce(mean)
                records.append(StepRecord(step=step, loss=float(mean) / world, seconds=seconds))
                if rank == 0:
                    print(
                        f"step {step:4d}  loss {records[-1].loss:8.4f}  {seconds * 1000:8.1f} ms",
                        flush=True,
                    )
            status = "completed"
        except KeyboardInterrupt:
            status = "interrupted"
        if rank == 0:
            write_summary(
                cfg, records, status, world, total_params, active, model.config, ds_config, on_cpu
            )
    finally:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    return 0 if status == "completed" else 1


def write_summary(
    cfg, records, status, world, total_params, active, config, ds_config, on_cpu
) -> None:
    import deepspeed
    import torch

    warm = [r for r in records if r.step >= cfg["warmup_steps"]]
    tokens_per_step = cfg["micro_batch"] * cfg["grad_accum"] * cfg["seq_len"] * world
    fpt = flops_per_token(
        active, config.hidden_size, config.vocab_size, config.num_hidden_layers, cfg["seq_len"]
    )
    step_s = sum(r.seconds for r in warm) / len(warm) if warm else None
    tps = tokens_per_step / step_s if step_s else None
    tflops = tps * fpt / world / 1e12 if tps else None
    peak = cfg.get("peak_tflops")
    if on_cpu:
        memory, kind = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
            "host_rss",
        )  # kB -> GB
    else:
        memory, kind = torch.cuda.max_memory_allocated() / 1e9, "device_allocated"
    tail = records[-3:]
    summary = TrainingSummary(
        status=status,
        framework_version=deepspeed.__version__,
        torch_version=torch.__version__,
        device=cfg["device"],
        world_size=world,
        zero_stage=ds_config["zero_optimization"]["stage"],
        offload=cfg["offload"],
        dtype=cfg["dtype"],
        micro_batch=cfg["micro_batch"],
        grad_accum=cfg["grad_accum"],
        seq_len=cfg["seq_len"],
        steps=len(records),
        warmup_steps=cfg["warmup_steps"],
        parameters=total_params,
        active_parameters=active,
        flops_per_token=fpt,
        tokens_per_step=tokens_per_step,
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps / world if tps else None,
        tflops_per_gpu=tflops,
        peak_tflops=peak,
        mfu=tflops / peak if tflops and peak else None,
        peak_memory_gb=memory,
        peak_memory_kind=kind,
        final_loss=sum(r.loss for r in tail) / len(tail) if tail else None,
        loss_curve=records,
        ds_config=ds_config,
        definitions=definitions(),
    )
    atomic.write_text(Path(cfg["out"]), summary.model_dump_json(indent=2))


if __name__ == "__main__":
    sys.exit(main())
