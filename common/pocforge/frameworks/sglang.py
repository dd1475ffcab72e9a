"""SGLang: spec -> ``python -m sglang.launch_server`` launches, one per node.

Multi-node is SGLang's own: every node runs the same server command with ``--nnodes``,
``--node-rank`` and ``--dist-init-addr`` of node 0; only node 0 serves HTTP. DP-attention is
``--attn-dp-size`` from SGLang 0.5.22 on (``--enable-dp-attention`` is deprecated in 0.5.23), and
``--enable-dp-attention --dp-size N`` before, the flags the node's release defines (read from
each release's source: :mod:`pocforge.frameworks.release_flags`); expert parallelism is
``--ep-size``. ``--enable-metrics`` serves Prometheus ``/metrics`` on the HTTP port (off by
default in SGLang), which the benchmark scrapes around each point as it does vLLM's.

On a CPU (``cluster.gpu: cpu``) SGLang runs its CPU engine in its own environment
(``.venv-sglang``): ``SGLANG_USE_CPU_ENGINE=1`` (without it the engine crashes and the launcher
hangs), torch-native attention, no overlap scheduler, and ``--sleep-on-idle`` (otherwise the
scheduler spins a core). Two CUDA-built packages it imports but never calls on CPU,
``sgl_kernel`` and ``torchvision``, are replaced by shims on ``PYTHONPATH`` (``shims/``) whose
every function raises, so any real use fails loudly.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from pocforge.frameworks.argcheck.run import rejected
from pocforge.frameworks.base import (
    PROFILE_DIR,
    LaunchContext,
    NodeLaunch,
    flag_args,
    model_path,
    node_hosts,
    profiled,
)
from pocforge.spec import PocSpec
from pocforge.spec.quantization import quantization_flag
from pocforge_kernels.integrations.sglang_hook import launch_env

ATTN_DP_SIZE_SINCE = Version("0.5.22")  # the first release whose flags have --attn-dp-size

DIST_PORT = 5000
SHIMS = Path(__file__).parent / "shims"
CPU_ARGS = {
    "device": "cpu",
    "attention-backend": "torch_native",
    "disable-overlap-schedule": True,
    "sleep-on-idle": True,
    # SGLang's CPU engine otherwise gives its KV cache about 72% of free memory (measured:
    # 7.5 M tokens, 14.3 GB for the kit's tiny model), so two servers exhaust a 24 GiB
    # machine; the token budget vLLM's VLLM_CPU_KVCACHE_SPACE=1 gives it, or so. A POC's
    # engine_args override it.
    "max-total-tokens": 16384,
}


class SglangAdapter:
    name = "sglang"

    def plan(self, spec: PocSpec, ctx: LaunchContext) -> list[NodeLaunch]:
        serving = spec.serving
        assert serving is not None and serving.framework == "sglang"
        hosts = node_hosts(spec, ctx)
        port = ctx.port or serving.port
        env = dict(ctx.extra_env)
        if spec.cluster.gpu == "cpu":
            env["SGLANG_USE_CPU_ENGINE"] = "1"
            env["PYTHONPATH"] = str(SHIMS)
        if profiled(spec):  # SGLang's torch profiler writes here on /start_profile
            env["SGLANG_TORCH_PROFILER_DIR"] = ctx.profile_dir or PROFILE_DIR
        if serving.kernels:  # pocforge-kernels' SGLang plugin, installed in SGLang's environment
            env.update(launch_env(serving.kernels, cpu=spec.cluster.gpu == "cpu"))
        launches = []
        for rank, host in enumerate(hosts):
            args = self._args(spec, ctx, rank, hosts[0], port)
            launches.append(
                NodeLaunch(
                    deployment="serving",
                    framework=self.name,
                    node_rank=rank,
                    host=host,
                    role="server" if rank == 0 else "headless",
                    argv=[ctx.sglang_python, "-m", "sglang.launch_server", *args],
                    env=env,
                    health_url=f"http://{host}:{port}/health" if rank == 0 else None,
                    check_args=args,
                )
            )
        return launches

    def _args(
        self, spec: PocSpec, ctx: LaunchContext, rank: int, head: str, port: int
    ) -> list[str]:
        model, serving, par = spec.model, spec.serving, spec.serving.parallelism
        attn_dp_size = par.dp_attention and (
            not serving.version or Version(serving.version) >= ATTN_DP_SIZE_SINCE
        )
        options: dict[str, object] = {
            "model-path": model_path(spec),
            "served-model-name": model.served_name or model.id,
            "dtype": "float32"
            if spec.cluster.gpu == "cpu" and model.dtype == "auto"
            else model.dtype,
            "tp-size": par.tp,
            "pp-size": par.pp if par.pp > 1 else None,
            "dp-size": par.dp if par.dp > 1 and not attn_dp_size else None,
            "attn-dp-size": par.dp if attn_dp_size else None,
            "enable-dp-attention": True if par.dp_attention and not attn_dp_size else None,
            "ep-size": par.ep if par.ep > 1 else None,
            "moe-a2a-backend": par.all2all_backend,
            "deepep-mode": par.deepep_mode,
            "context-length": model.max_model_len,
            "quantization": quantization_flag("sglang", model.quantization),
            "kv-cache-dtype": model.kv_cache_dtype if model.kv_cache_dtype != "auto" else None,
            "revision": model.revision,
            "host": ctx.host_override or "0.0.0.0",
            "port": port,
            "enable-metrics": True,  # /metrics, scraped around each sweep point (bench.promscrape)
        }
        if spec.cluster.nodes > 1:
            options.update(
                {
                    "nnodes": spec.cluster.nodes,
                    "node-rank": rank,
                    "dist-init-addr": f"{head}:{DIST_PORT}",
                }
            )
        offload = serving.kv_offload
        if offload is not None:  # HiCache (validate: the only backend SGLang has here)
            options.update(
                {
                    "enable-hierarchical-cache": True,
                    "hicache-size": offload.size_gb,
                    "hicache-write-policy": offload.write_policy,
                    "hicache-storage-backend": offload.storage_backend,
                }
            )
        if spec.cluster.gpu == "cpu":
            options.update(CPU_ARGS)
        for key, value in serving.engine_args.items():
            options[key.removeprefix("--")] = value
        return flag_args(options)

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, object]]:
        return [(one, "sglang_args", one.check_args) for one in launches if one.check_args]

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """SGLang's own ``prepare_server_args`` on every server's arguments (a router has none)."""
        items = self.check_items(launches)
        return rejected(items, ctx.sglang_python, "SGLang rejects the arguments")
