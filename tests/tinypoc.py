"""A tiny-model CPU POC in a folder of its own, as a user would write one: the spec the
end-to-end and fault tests run with ``pocforge run``."""

from __future__ import annotations

from pathlib import Path

import yaml


def workspace(
    tmp_path: Path,
    name: str,
    *,
    training: bool,
    num_prompts: int,
    concurrency: list[int],
    osl: int = 8,
    engine_args: dict | None = None,
    profile: bool = True,
    warmup: int | None = None,
) -> Path:
    """A folder with ``pocs/<name>/poc.yaml`` (a tiny-model CPU POC) where runs land in results/."""
    spec = {
        "poc": {"name": name, "customer": "pocforge tests", "owner": "tests"},
        "model": {
            "id": "model",
            "served_name": "tiny",
            "dtype": "float32",
            "max_model_len": 512,
            "tiny": {"arch": "llama"},
        },
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "serving": {
            "framework": "vllm",
            "engine_args": engine_args or {"max-num-seqs": 8},
            "workloads": [
                {
                    "name": "chat",
                    "api": "chat",
                    "dataset": {"kind": "random", "isl": 16, "osl": osl},
                    "load": {"concurrency": concurrency},
                    "num_prompts": num_prompts,
                    "slos": [{"metric": "ttft_ms", "percentile": 90, "max_ms": 60000}],
                    # vLLM's torch profiler around the second point (the resumed run's),
                    # in a pass of two waves of its concurrency
                    "profile": {"points": [f"c{concurrency[-1]}"], "requests": 2 * concurrency[-1]},
                }
            ],
        },
        "acceptance": {
            "criteria": ["serving.chat.ttft_ms.p90 <= 60000", "serving.chat.error_rate <= 0"]
        },
    }
    chat = spec["serving"]["workloads"][0]
    if not profile:
        del chat["profile"]
    if warmup is not None:
        chat["warmup"] = warmup
    if training:
        # torch.profiler over steps 1 and 2 on both ranks
        spec["training"] = tiny_training(3, profile={"steps": [1, 2]})
        spec["acceptance"]["criteria"].append("training.final_loss < 50")
        spec["kernels"] = {"ops": [{"op": "rms_norm"}]}
        spec["acceptance"]["criteria"].append("kernels.rms_norm.max_rel_error <= 0.02")
    folder = tmp_path / "pocs" / name
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp_path


def tiny_training(steps: int, **more) -> dict:
    """Two DeepSpeed ranks on gloo training the tiny model for ``steps`` steps."""
    return {
        "framework": "deepspeed",
        "zero_stage": 1,
        "dtype": "float32",
        "world_size": 2,
        "micro_batch": 1,
        "seq_len": 16,
        "steps": steps,
        "warmup_steps": 1,
        **more,
    }
