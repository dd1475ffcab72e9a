"""Megatron-LM: spec -> Megatron-LM's command-line arguments and the launch per node.

On GPU nodes every node runs ``torchrun`` for its own ranks with Megatron-LM's
``pretrain_gpt.py`` (where the image keeps it: AMD's rocm/primus images in Primus's
``third_party/Megatron-LM``, NGC's with the checkout mounted at ``/workspace/Megatron-LM``),
or AMD Primus's ``examples/megatron/pretrain.py`` with an
experiment file whose ``overrides`` are the same arguments. On a ``cpu`` cluster the ranks
run the kit's own driver, ``pocforge.training.megatron_driver``, which trains with
Megatron-Core on gloo and reads the same arguments (a subset), so one renderer serves
both paths and the CPU test runs the arguments the GPU gets.

Megatron-LM's argument parser (``megatron.training.arguments``) is not on the package
registry; :meth:`MegatronAdapter.check` runs it where the interpreter has it and
otherwise checks the layout with Megatron-Core's own ``TransformerConfig``. A node's check
(:meth:`MegatronAdapter.check_items`) runs in its image with the image's checkout.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pocforge.catalog import ModelFacts
from pocforge.frameworks.argcheck.run import rejected
from pocforge.frameworks.base import LaunchContext, NodeLaunch, node_hosts
from pocforge.frameworks.megatron_init import TRACKER, conversion_argv, load_args, load_dir
from pocforge.frameworks.megatron_init import tokenizer_model as init_tokenizer
from pocforge.frameworks.platform_settings import training_env
from pocforge.spec import PocSpec
from pocforge.spec.planning import facts_of
from pocforge.spec.training_schema import MegatronLayout

MASTER_PORT = 29500
# Primus's entry in its checkout; its Megatron-LM is the submodule in third_party/
PRIMUS_ENTRY = "/examples/megatron/pretrain.py"
# Primus names its model files after the model (primus/configs/models/megatron/<name>.yaml).
PRIMUS_MODELS = {
    "meta-llama/Llama-3.1-8B": "llama3.1_8B",
    "meta-llama/Llama-3.1-70B": "llama3.1_70B",
    "meta-llama/Llama-3.1-405B": "llama3.1_405B",
    "meta-llama/Llama-3.3-70B-Instruct": "llama3.3_70B",
    "meta-llama/Meta-Llama-3-8B": "llama3_8B",
    "meta-llama/Meta-Llama-3-70B": "llama3_70B",
    "deepseek-ai/DeepSeek-V3": "deepseek_v3",
    "mistralai/Mixtral-8x7B-v0.1": "mixtral_8x7B_v0.1",
    "mistralai/Mixtral-8x22B-v0.1": "mixtral_8x22B_v0.1",
}


def layout_of(spec: PocSpec) -> MegatronLayout:
    assert spec.training is not None
    return spec.training.megatron or MegatronLayout()


def data_parallel(spec: PocSpec) -> int:
    """What the world leaves after tensor, pipeline and context parallelism."""
    assert spec.training is not None
    world = spec.training.world_size or spec.cluster.total_gpus
    return world // layout_of(spec).model_parallel


# Megatron's RoPE defaults (megatron/training/arguments.py): --rotary-base 10000, and no
# scaling; a model that differs says so in its config.json (rope_theta, rope_scaling).
MEGATRON_ROTARY_BASE = 10000.0
MEGATRON_NORM_EPSILON = 1e-5  # megatron/training/arguments.py: --norm-epsilon


def _rope_args(facts: ModelFacts) -> list[str]:
    """RoPE as the model's config has it: its base, and Llama 3.x's frequency scaling
    (``--use-rope-scaling --rope-scaling-factor``, as Megatron-LM's and Megatron-Bridge's
    Llama 3.1 recipes set them). A scaling Megatron-LM has no flag for is refused by the
    spec's rules (``megatron_layout_fits``), not trained as another model."""
    args = []
    if facts.rope_theta is not None and facts.rope_theta != MEGATRON_ROTARY_BASE:
        args += ["--rotary-base", str(int(facts.rope_theta))]
    if facts.rope_scaling == "llama3":
        args += [
            "--use-rope-scaling",
            "--rope-scaling-factor",
            f"{facts.rope_scaling_factor or 8.0:g}",
        ]
    elif facts.rope_scaling is not None:
        raise ValueError(
            f"the model's RoPE scaling {facts.rope_scaling!r} has no Megatron-LM flag the kit "
            "sets (llama3 only): train it with a framework that reads its config, or set "
            "training.megatron.extra_args for it"
        )
    return args


def model_args(facts: ModelFacts, seq_len: int) -> list[str]:
    """The architecture: a Llama-style decoder (RMSNorm, SwiGLU, RoPE, no biases, untied
    embeddings), MoE layers where the model has experts."""
    heads = facts.heads or 1
    args = [
        "--num-layers", str(facts.layers),
        "--hidden-size", str(facts.hidden),
        "--ffn-hidden-size", str(facts.intermediate or 4 * (facts.hidden or 0)),
        "--num-attention-heads", str(heads),
    ]  # fmt: skip
    if facts.kv_heads and facts.kv_heads != heads:
        args += ["--group-query-attention", "--num-query-groups", str(facts.kv_heads)]
    if facts.head_dim and facts.hidden and facts.head_dim * heads != facts.hidden:
        args += ["--kv-channels", str(facts.head_dim)]
    args += [
        "--seq-length", str(seq_len),
        "--max-position-embeddings", str(max(seq_len, facts.max_position or 0)),
        "--position-embedding-type", "rope",
        "--normalization", "RMSNorm",
        "--swiglu",
        "--disable-bias-linear",
        "--attention-dropout", "0.0",
        "--hidden-dropout", "0.0",
    ]  # fmt: skip
    if facts.norm_eps is not None and facts.norm_eps != MEGATRON_NORM_EPSILON:
        args += ["--norm-epsilon", f"{facts.norm_eps:g}"]
    if not facts.tie_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    args += _rope_args(facts)
    if facts.experts:
        args += ["--num-experts", str(facts.experts), "--moe-router-topk", str(facts.top_k or 1)]
        if facts.moe_intermediate:
            args += ["--moe-ffn-hidden-size", str(facts.moe_intermediate)]
        shared = facts.shared_intermediate or (facts.shared_experts or 0) * (
            facts.moe_intermediate or 0
        )
        if shared:
            args += ["--moe-shared-expert-intermediate-size", str(shared)]
        args += ["--moe-token-dispatcher-type", "alltoall"]
    return args


def megatron_args(spec: PocSpec) -> list[str]:
    """Megatron-LM's arguments for ``spec.training`` (the same on every rank)."""
    training = spec.training
    assert training is not None and training.framework == "megatron"
    layout, facts = layout_of(spec), facts_of(spec)
    on_cpu = spec.cluster.gpu == "cpu"
    global_batch = training.micro_batch * training.grad_accum * data_parallel(spec)
    args = model_args(facts, training.seq_len)
    args += [
        "--tensor-model-parallel-size", str(layout.tp),
        "--pipeline-model-parallel-size", str(layout.pp),
    ]  # fmt: skip
    if layout.vpp:
        args += ["--num-layers-per-virtual-pipeline-stage", str(facts.layers // (layout.pp * layout.vpp))]  # fmt: skip
    if layout.cp > 1:
        args += ["--context-parallel-size", str(layout.cp), "--cp-comm-type", layout.cp_comm_type]
    if facts.experts:
        args += ["--expert-model-parallel-size", str(layout.ep)]
        if layout.expert_tp is not None:
            args += ["--expert-tensor-parallel-size", str(layout.expert_tp)]
    if layout.sequence_parallel:
        args.append("--sequence-parallel")
    if layout.recompute == "selective":
        args.append("--recompute-activations")
    elif layout.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]  # fmt: skip
    if layout.distributed_optimizer:
        args.append("--use-distributed-optimizer")
    args += [
        "--micro-batch-size", str(training.micro_batch),
        "--global-batch-size", str(global_batch),
        "--train-iters", str(training.steps),
        "--lr", str(training.lr),
        "--min-lr", str(training.lr),
        "--lr-decay-style", "constant",
        "--lr-warmup-iters", "0",
        "--weight-decay", "0.0",
        "--clip-grad", str(training.gradient_clipping),
        "--seed", "0",
    ]  # fmt: skip
    if training.dtype == "bfloat16":
        args.append("--bf16")
    elif training.dtype == "float16":
        args.append("--fp16")
    if layout.fp8:
        args += ["--fp8-format", layout.fp8, "--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max"]  # fmt: skip
    if layout.data.kind == "mock" and training.init is not None:
        # The checkpoint's own tokenizer: its vocabulary is the embedding's
        args += ["--mock-data", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", init_tokenizer(spec)]  # fmt: skip
    elif layout.data.kind == "mock":
        args += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(facts.vocab)]  # fmt: skip
    else:
        args += [
            "--data-path", str(layout.data.path),
            "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", str(layout.data.tokenizer),
            "--split", "100,0,0",
        ]  # fmt: skip
    args += load_args(spec, facts.vocab, layout.tp)
    if training.profile is not None:
        world = training.world_size or spec.cluster.total_gpus
        args += profile_args(training.profile.steps, world, training.profile.tool)
    # A throughput run: log every iteration with its TFLOP/s, no evaluation, no checkpoint.
    args += ["--log-interval", "1", "--log-throughput", "--eval-iters", "0", "--eval-interval", str(training.steps + 1)]  # fmt: skip
    if on_cpu:
        # The CPU driver's layers: Megatron-Core's local (non-Transformer-Engine) ones on
        # the CPU, unfused, over gloo.
        args += [
            "--transformer-impl", "local",
            "--use-cpu-initialization",
            "--no-gradient-accumulation-fusion",
            "--no-masked-softmax-fusion",
            "--no-bias-swiglu-fusion",
            "--no-bias-dropout-fusion",
            "--no-rope-fusion",
            "--no-persist-layer-norm",
            "--distributed-backend", "gloo",
        ]  # fmt: skip
    else:
        args += ["--transformer-impl", "transformer_engine", "--distributed-backend", "nccl"]
    return args + list(layout.extra_args)


PROFILE_DIR = "profile/tensorboard"  # under the training stage's folder (the launch's cwd)


def profiled_iterations(steps: list[int]) -> range:
    """The Megatron iterations (its log numbers them from 1) that profile the spec's steps
    (counted from 0): step ``k`` is iteration ``k + 1``, from the first step to the last."""
    return range(min(steps) + 1, max(steps) + 2)


def profile_args(steps: list[int], world: int, tool: str = "torch") -> list[str]:
    """Megatron-LM's profiler over the spec's steps on every rank.

    Megatron starts the profiler before its loop and steps it at the top of each iteration,
    on ``schedule(wait=start-1, warmup=1, active=end-start)``: it records iterations
    ``start`` to ``end - 1`` (:func:`profiled_iterations`). Its trace handler writes to
    ``--tensorboard-dir`` (newer releases to ``<tensorboard-dir>/../torch_profile/``): both
    land under ``training/profile/``. For a GPU tool (nsys, rocprofv3) it is ``--profile``
    alone: Megatron then calls ``torch.cuda.cudart().cudaProfilerStart()`` at iteration
    ``start`` and ``Stop()`` at ``end``, the range the tool records.
    """
    iterations = profiled_iterations(steps)
    start, end = iterations.start, iterations.stop
    args = [
        "--profile",
        "--profile-step-start", str(start),
        "--profile-step-end", str(end),
        "--profile-ranks", *[str(r) for r in range(world)],
    ]  # fmt: skip
    if tool == "torch":
        args[1:1] = ["--use-pytorch-profiler"]
        args += ["--tensorboard-dir", PROFILE_DIR]
    return args


def _dashes_to_overrides(args: list[str]) -> dict:
    """``["--tp-size", "8", "--swiglu"]`` -> ``{"tp_size": 8, "swiglu": True}`` (Primus's
    ``overrides`` are Megatron's argument names with underscores)."""
    out: dict = {}
    index = 0
    while index < len(args):
        name = args[index][2:].replace("-", "_")
        following = args[index + 1] if index + 1 < len(args) else None
        if following is None or following.startswith("--"):
            out[name] = True
            index += 1
            continue
        out[name] = _value(following)
        index += 2
    return out


def _value(text: str) -> int | float | str:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def primus_experiment(spec: PocSpec) -> dict:
    """AMD Primus's experiment file: its pre-trainer module on Megatron, with the model's
    Primus config and the kit's arguments as ``overrides``."""
    model = PRIMUS_MODELS.get(spec.model.id)
    return {
        "work_group": "pocforge",
        "user_name": "pocforge",
        "exp_name": spec.name,
        "workspace": "./output",
        "modules": {
            "pre_trainer": {
                "framework": "megatron",
                "config": "pre_trainer.yaml",
                "model": f"{model}.yaml",
                "overrides": _dashes_to_overrides(megatron_args(spec)),
            }
        },
    }


class MegatronAdapter:
    name = "megatron"

    def plan(
        self, spec: PocSpec, ctx: LaunchContext, out_dir: Path | None = None
    ) -> list[NodeLaunch]:
        training, cluster = spec.training, spec.cluster
        assert training is not None
        layout = layout_of(spec)
        world = training.world_size or cluster.total_gpus
        per_node = world // cluster.nodes
        hosts = node_hosts(spec, ctx)
        env = dict(ctx.extra_env)
        files: dict[str, str] = {}
        if cluster.gpu == "cpu":
            env.update({"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
            entry = ["-m", "pocforge.training.megatron_driver", *megatron_args(spec)]
        elif layout.entry == "primus":
            files["primus-exp.yaml"] = yaml.safe_dump(primus_experiment(spec), sort_keys=False)
            # Primus's run scripts: MEGATRON_PATH=${PRIMUS_PATH}/third_party/Megatron-LM,
            # PYTHONPATH=${MEGATRON_PATH}:${PRIMUS_PATH}
            primus = layout.checkout(ctx.checkouts)
            entry = [f"{primus}{PRIMUS_ENTRY}", "--exp", "primus-exp.yaml"]
            env["PYTHONPATH"] = f"{primus}/third_party/Megatron-LM:{primus}"
        else:
            entry = [f"{layout.checkout(ctx.checkouts)}/pretrain_gpt.py", *megatron_args(spec)]
        own = training.runtime.env  # the POC's value wins: left for plan_deployment
        for key, value in training_env(self.name, cluster.gpu).items():
            if key not in own:
                env.setdefault(key, value)
        launches = []
        convert = conversion_argv(spec, ctx.python)
        for rank, host in enumerate(hosts):
            if convert is not None:  # every node converts once, before its ranks start
                launches.append(
                    NodeLaunch(
                        "training",
                        self.name,
                        rank,
                        host,
                        "convert",
                        convert,
                        env,
                        creates=f"{load_dir(spec)}/{TRACKER}",
                    )  # fmt: skip
                )
            master = "127.0.0.1" if cluster.nodes == 1 else hosts[0]
            argv = [
                ctx.python,
                "-m",
                "torch.distributed.run",
                f"--nproc_per_node={per_node}",
                f"--nnodes={cluster.nodes}",
                f"--node_rank={rank}",
                f"--master_addr={master}",
                f"--master_port={ctx.port or MASTER_PORT}",
                *entry,
            ]
            role = "launcher" if cluster.nodes == 1 else "trainer"
            launches.append(NodeLaunch("training", self.name, rank, host, role, argv, env, files))
        return launches

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """The arguments here (``validate``): Megatron-LM's own parser where ``ctx.python``
        has it, else Megatron-Core's ``TransformerConfig`` built from them. The nodes'
        checkouts are not here: a node's own check holds the launch to its image's."""
        here = [
            (one, script, {"argv": item["argv"], "world_size": item["world_size"]})
            for one, script, item in self.check_items(launches)
        ]
        return rejected(here, ctx.python, "Megatron rejects the arguments")

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, dict]]:
        """A node's check: the arguments under the image's Megatron-LM (its checkout on the
        path), and the entry script there at all."""
        return [
            (
                one,
                "megatron_args",
                {"argv": _megatron_argv(one), "world_size": _world_size(one), **_checkout_of(one)},
            )  # fmt: skip
            for one in launches
            if one.role != "convert"
        ]


def _checkout_of(launch: NodeLaunch) -> dict[str, str]:
    """The entry script a GPU launch runs and the Megatron-LM checkout it imports ({} for
    the kit's CPU driver, a module of the kit)."""
    for part in launch.argv:
        if part.endswith("/pretrain_gpt.py"):
            return {"entry": part, "checkout": part.rsplit("/", 1)[0]}
        if part.endswith(PRIMUS_ENTRY):
            primus = part[: -len(PRIMUS_ENTRY)]
            return {"entry": part, "checkout": f"{primus}/third_party/Megatron-LM"}
    return {}


def _megatron_argv(launch: NodeLaunch) -> list[str]:
    """The Megatron arguments of a launch: what follows the entry script or module."""
    argv = launch.argv
    if "--exp" in argv:  # Primus: the overrides of its experiment file
        overrides = yaml.safe_load(launch.files["primus-exp.yaml"])["modules"]["pre_trainer"]
        flat: list[str] = []
        for key, value in overrides["overrides"].items():
            flat.append("--" + key.replace("_", "-"))
            if value is not True:
                flat.append(str(value))
        return flat
    for index, part in enumerate(argv):
        if part.endswith("pretrain_gpt.py") or part == "pocforge.training.megatron_driver":
            return argv[index + 1 :]
    raise ValueError(f"no Megatron entry in {argv}")


def _world_size(launch: NodeLaunch) -> int:
    flags = dict(
        part[2:].split("=", 1) for part in launch.argv if part.startswith("--n") and "=" in part
    )
    return int(flags["nproc_per_node"]) * int(flags["nnodes"])
