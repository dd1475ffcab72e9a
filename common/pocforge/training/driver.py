"""The per-rank training benchmark, launched by torchrun or the deepspeed launcher.

``python -m pocforge.training.driver --config run.json``: builds the model (a local model
folder's config, or the spec's model facts) with random weights, trains it under DeepSpeed
for the configured steps on a fixed pool of random sequences (so a working optimizer
visibly lowers the loss), times every optimizer step, and has rank 0 write each step to
``steps.jsonl`` as it ends and ``summary.json`` at the end: also when a peer rank dies or
the launcher stops it (``failed`` / ``interrupted``, with every step done so far).

A completed run ends with a barrier and ``destroy_process_group``, then leaves with
``os._exit``: the interpreter's own teardown, after the results are written, is where a
rank aborted with ``terminate called without an active exception`` (a native thread of
the communication stack destroyed while still joinable; about 1 demo in 11), turning a
finished run into a failed one. A failed run skips the barrier: its peers may be gone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
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
    # the launcher stops the surviving ranks with SIGTERM when one dies: rank 0 then writes
    # what it has (Python's default for SIGTERM ends the process without a word)
    signal.signal(signal.SIGTERM, _stopped)

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
    steps_file = Path(cfg["out"]).with_name("steps.jsonl")
    if rank == 0:  # a node's out is relative ("training/"): made here, as the summary's is
        steps_file.parent.mkdir(parents=True, exist_ok=True)
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
        chosen = cfg.get("profile_steps") or []
        profiler = None
        try:
            for step in range(cfg["steps"]):
                if chosen and step == chosen[0]:
                    tool = cfg.get("profile_tool", "torch")
                    profiler = (
                        start_profiler(torch, on_cpu, model)
                        if tool == "torch"
                        else CudaRange(torch).start()
                    )
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
                records.append(
                    StepRecord(
                        step=step,
                        loss=float(mean) / world,
                        seconds=seconds,
                        ended_unix_s=time.time(),
                    )
                )
                if rank == 0:
                    with steps_file.open("a", encoding="utf-8") as fh:  # on disk as it ends
                        fh.write(records[-1].model_dump_json() + "\n")
                    print(
                        f"step {step:4d}  loss {records[-1].loss:8.4f}  {seconds * 1000:8.1f} ms",
                        flush=True,
                    )
                if profiler is not None and step == chosen[-1]:
                    save_profile(profiler, Path(cfg["out"]).with_name("profile"), rank, on_cpu)
                    profiler = None
            status = "completed"
        except KeyboardInterrupt:
            status = "interrupted"
        except Exception as exc:  # a peer that died mid-collective: keep the steps done
            print(f"rank {rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            status = "failed"
        if profiler is not None:  # cut off mid-profile: what it recorded is kept
            save_profile(profiler, Path(cfg["out"]).with_name("profile"), rank, on_cpu)
        if rank == 0:
            write_summary(
                cfg, records, status, world, total_params, active, model.config, ds_config, on_cpu
            )
    finally:
        if dist.is_initialized() and status == "completed":
            dist.barrier()
            dist.destroy_process_group()
    return 0 if status == "completed" else 1


def start_profiler(torch, on_cpu: bool, model=None):
    """torch.profiler over the chosen steps: CPU operations and the GPU's kernels (CUDA and
    ROCm both report as CUDA activity). Each decoder layer's forward is a named range
    (``LlamaDecoderLayer model.layers.0``), so the trace names the model's layers without
    Python stack tracing: with stacks on, torch's Python tracer crashed a rank (SIGSEGV,
    1 run in 2 here)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if not on_cpu and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    profiler = profile(activities=activities)
    profiler.hooks = _name_layers(torch, model) if model is not None else []
    profiler.start()
    return profiler


def _name_layers(torch, model) -> list:
    """Forward hooks that open and close a ``record_function`` range per decoder layer."""
    handles = []
    for name, module in model.named_modules():
        kind = type(module).__name__
        if not kind.endswith("DecoderLayer"):
            continue
        label = f"{kind} {name}"

        def enter(mod, args, label=label):
            mod._pocforge_range = torch.autograd.profiler.record_function(label)
            mod._pocforge_range.__enter__()

        def leave(mod, args, output):
            scope = getattr(mod, "_pocforge_range", None)
            if scope is not None:
                scope.__exit__(None, None, None)
                mod._pocforge_range = None

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


class CudaRange:
    """The chosen steps as a CUDA-profiler range (``profile.tool`` nsys or rocprofv3, which
    the launch runs under: :mod:`pocforge.frameworks.gpu_profiler`); the tool writes."""

    def __init__(self, torch):
        self.profiler = torch.cuda.profiler

    def start(self) -> CudaRange:
        self.profiler.start()
        return self

    def stop(self) -> None:
        self.profiler.stop()


def save_profile(profiler, folder: Path, rank: int, on_cpu: bool) -> None:
    """Stop ``profiler``; write this rank's gzipped Chrome trace and torch's table of the
    operations by time (the form vLLM writes, which the dashboard reads)."""
    profiler.stop()
    if isinstance(profiler, CudaRange):  # the GPU tool records and writes, not torch
        return
    for handle in getattr(profiler, "hooks", []):
        handle.remove()
    export_profile(profiler, folder, rank, on_cpu)


def export_profile(profiler, folder: Path, rank: int, on_cpu: bool) -> None:
    """A stopped profiler's trace (``rank<r>.pt.trace.json.gz``) and its table of the
    operations by time (``rank<r>.profiler_out.txt``) in ``folder``."""
    import gzip
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    plain = folder / f"rank{rank}.pt.trace.json"
    profiler.export_chrome_trace(str(plain))
    with plain.open("rb") as src, gzip.open(f"{plain}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    sort = "self_cpu_time_total" if on_cpu else "self_cuda_time_total"
    table = profiler.key_averages().table(sort_by=sort, row_limit=30)
    atomic.write_text(folder / f"rank{rank}.profiler_out.txt", table + "\n")


def _stopped(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def write_summary(
    cfg, records, status, world, total_params, active, config, ds_config, on_cpu
) -> None:
    import deepspeed
    import torch

    # the profiled steps run under the profiler's overhead: timed, but not in the figures
    # (unless they are all there is)
    profiled = set(cfg.get("profile_steps") or [])
    warm = [r for r in records if r.step >= cfg["warmup_steps"]]
    warm = [r for r in warm if r.step not in profiled] or warm
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
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown after the results are written (module docstring)
