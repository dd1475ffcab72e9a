"""DeepSpeed: spec -> ``ds_config.json``, the driver's ``run.json`` and the launch per node.

One node runs ``torchrun`` with one process per GPU; several nodes run the ``deepspeed``
launcher on node 0 with a hostfile (it starts the other nodes over SSH). Every rank runs
``pocforge.training.driver``.

The config is checked by DeepSpeed's own ``DeepSpeedConfig`` (types, nested keys) and for
top-level keys DeepSpeed never reads (``argcheck/deepspeed_config.py``), in a subprocess so
the kit itself never imports DeepSpeed.

On a CPU: ``DS_ACCELERATOR=cpu``, gloo, ``torch_adam`` (the fused CPU Adam takes minutes to
compile), C++ extensions built into the project's ``.torch_extensions`` (the shared-memory
comm op compiles once per machine, about 2.5 minutes), stale build locks removed first.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocforge.catalog import gpu
from pocforge.frameworks.argcheck.run import rejected
from pocforge.frameworks.base import LaunchContext, NodeLaunch, model_path, node_hosts
from pocforge.paths import extensions_dir
from pocforge.spec import PocSpec

MASTER_PORT = 29500


def ds_config(spec: PocSpec) -> dict:
    """The DeepSpeed config for ``spec.training`` (``ds_config`` keys merged over it)."""
    training = spec.training
    assert training is not None
    zero: dict = {"stage": training.zero_stage}
    if training.offload in ("optimizer", "both"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": spec.cluster.gpu != "cpu"}
    if training.offload in ("parameters", "both"):
        zero["offload_param"] = {"device": "cpu", "pin_memory": spec.cluster.gpu != "cpu"}
    config: dict = {
        "train_micro_batch_size_per_gpu": training.micro_batch,
        "gradient_accumulation_steps": training.grad_accum,
        "gradient_clipping": training.gradient_clipping,
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": training.lr, "weight_decay": 0.0}},
        "steps_per_print": max(training.steps, 1),
        "wall_clock_breakdown": False,
    }
    if training.dtype == "bfloat16":
        config["bf16"] = {"enabled": True}
    elif training.dtype == "float16":
        config["fp16"] = {"enabled": True}
    if spec.cluster.gpu == "cpu":
        config["optimizer"]["params"]["torch_adam"] = True
    return _merge(config, training.ds_config)


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(out.get(key), dict) and isinstance(value, dict)
            else value
        )
    return out


def run_config(spec: PocSpec, out_dir: Path) -> dict:
    """What the driver needs on every rank."""
    training, cluster = spec.training, spec.cluster
    facts = spec.model.facts.model_dump(exclude_none=True) if spec.model.facts else None
    peak = gpu(cluster.gpu).dense_tflops(training.dtype)
    return {
        "model": {"path": model_path(spec), "facts": facts},
        "ds_config": ds_config(spec),
        "seq_len": training.seq_len,
        "steps": training.steps,
        "warmup_steps": training.warmup_steps,
        "micro_batch": training.micro_batch,
        "grad_accum": training.grad_accum,
        "dtype": training.dtype,
        "offload": training.offload,
        "device": cluster.gpu,
        "peak_tflops": peak,
        "seed": 0,
        "out": str(out_dir / "summary.json"),
        "profile_steps": sorted(training.profile.steps) if training.profile else [],
        "profile_tool": training.profile.tool if training.profile else "torch",
    }


class DeepSpeedAdapter:
    name = "deepspeed"

    def plan(
        self, spec: PocSpec, ctx: LaunchContext, out_dir: Path | None = None
    ) -> list[NodeLaunch]:
        training, cluster = spec.training, spec.cluster
        assert training is not None
        out_dir = out_dir or Path("training")  # relative: the launch's working directory
        world = training.world_size or cluster.total_gpus
        files = {
            "ds_config.json": json.dumps(ds_config(spec), indent=2),
            "run.json": json.dumps(run_config(spec, out_dir), indent=2),
        }
        env = dict(ctx.extra_env)
        if cluster.gpu == "cpu":
            env.update(
                {
                    "DS_ACCELERATOR": "cpu",
                    "TORCH_EXTENSIONS_DIR": extensions_dir(ctx.python),
                    "OMP_NUM_THREADS": "1",
                    "TOKENIZERS_PARALLELISM": "false",
                }
            )
        driver = ["-m", "pocforge.training.driver", "--config", "run.json"]
        hosts = node_hosts(spec, ctx)
        if cluster.nodes == 1:
            per_node = world
            argv = [
                ctx.python,
                "-m",
                "torch.distributed.run",
                f"--nproc_per_node={per_node}",
                "--nnodes=1",
                "--master_addr=127.0.0.1",
                f"--master_port={ctx.port or MASTER_PORT}",
                *driver,
            ]
        else:
            # Every node runs DeepSpeed's launcher for its own ranks (--no_ssh, --node_rank):
            # no pdsh and no SSH between the nodes, and each node writes its own config,
            # run file and hostfile (the world's layout) instead of sharing a file system.
            per_node = world // cluster.nodes
            files["hostfile"] = "".join(f"{host} slots={per_node}\n" for host in hosts)
            launches = []
            for rank, host in enumerate(hosts):
                argv = [
                    ctx.python,
                    "-m",
                    "deepspeed.launcher.runner",
                    "--hostfile",
                    "hostfile",
                    "--no_ssh",
                    f"--node_rank={rank}",
                    f"--num_nodes={cluster.nodes}",
                    f"--num_gpus={per_node}",
                    f"--master_addr={hosts[0]}",
                    f"--master_port={MASTER_PORT}",
                    "--no_local_rank",  # the driver reads LOCAL_RANK from the environment
                    "--module",
                    *driver[1:],
                ]
                launches.append(
                    NodeLaunch("training", self.name, rank, host, "trainer", argv, env, dict(files))
                )
            return launches
        return [NodeLaunch("training", self.name, 0, hosts[0], "launcher", argv, env, files)]

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """DeepSpeed's own config class plus the unknown-top-level-key check, per launch."""
        return rejected(self.check_items(launches), ctx.python, "DeepSpeed rejects ds_config.json")

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, object]]:
        return [
            (one, "deepspeed_config", json.loads(one.files["ds_config.json"]))
            for one in launches
            if "ds_config.json" in one.files
        ]
