"""TensorRT-LLM: spec -> one ``trtllm-serve`` launch on one NVIDIA node.

``trtllm-serve <model> --host --port --backend pytorch --tp_size --pp_size [--ep_size]
[--max_batch_size] [--max_num_tokens] [--max_seq_len] [--kv_cache_free_gpu_memory_fraction]
[--revision] <engine_args> --extra_llm_api_options extra-llm-api-options.yaml``: the flags are
``tensorrt_llm/commands/serve.py``'s (NVIDIA/TensorRT-LLM, 2026), the way the
``trtllm-serve`` docs and SemiAnalysis InferenceX's H200 scripts launch it; the YAML
file (the launch's ``files``, written to its working directory) holds the LLM API options
(``spec/trtllm_options.py``: the dtype, attention DP and the KV-cache dtype from the spec,
then ``serving.trtllm.llm_api_options``). The server answers ``/health`` once the engine is
up (the ``trtllm-serve`` docs' endpoints). One server spawns its ``tp_size`` ranks itself
(MPI), so a node runs one process; the rules refuse more than one node and non-NVIDIA GPUs.
"""

from __future__ import annotations

import yaml

from pocforge.frameworks.argcheck.run import ArgcheckUnavailable, rejected
from pocforge.frameworks.base import LaunchContext, NodeLaunch, model_path, node_hosts
from pocforge.spec import PocSpec
from pocforge.spec.planning import facts_of
from pocforge.spec.trtllm_options import (
    OPTIONS_FILE,
    key_problem,
    options_file,
    settings,
    unknown_keys,
)

SERVE = "trtllm-serve"  # the console script of the tensorrt-llm distribution (and its images)


def serve_flags(options: dict[str, object]) -> list[str]:
    """``{"max_batch_size": 8, "trust_remote_code": True, "x": False}`` as trtllm-serve's
    flags: its own underscore names, True a bare flag, False and None left out (its
    click flags have no ``--no-`` form), a list one flag per value (``multiple=True``)."""
    argv: list[str] = []
    for key, value in options.items():
        name = f"--{key.removeprefix('--')}"
        if value is None or value is False:
            continue
        if value is True:
            argv.append(name)
        elif isinstance(value, list):
            for one in value:
                argv += [name, str(one)]
        else:
            argv += [name, str(value)]
    return argv


class TrtllmAdapter:
    name = "trtllm"

    def plan(self, spec: PocSpec, ctx: LaunchContext) -> list[NodeLaunch]:
        serving = spec.serving
        assert serving is not None and serving.framework == "trtllm"
        host = node_hosts(spec, ctx)[0]
        port = ctx.port or serving.port
        args = self._args(spec, ctx, port)
        return [
            NodeLaunch(
                deployment="serving",
                framework=self.name,
                node_rank=0,
                host=host,
                role="server",
                argv=[SERVE, *args],
                env=dict(ctx.extra_env),
                files={OPTIONS_FILE: yaml.safe_dump(options_file(spec), sort_keys=False)},
                health_url=f"http://{host}:{port}/health",
                check_args=args,
            )
        ]

    def _args(self, spec: PocSpec, ctx: LaunchContext, port: int) -> list[str]:
        model, serving = spec.model, spec.serving
        assert serving is not None
        par, typed = serving.parallelism, settings(spec)
        options: dict[str, object] = {
            "host": ctx.host_override or "0.0.0.0",
            "port": port,
            "backend": "pytorch",
            "tp_size": par.tp,
            "pp_size": par.pp,
            # MoE models get their split named (ep 1: moe_tp = tp); dense ones none.
            "ep_size": par.ep if par.ep > 1 or facts_of(spec).is_moe else None,
            "max_batch_size": typed.max_batch_size,
            "max_num_tokens": typed.max_num_tokens,
            "max_seq_len": model.max_model_len,
            "kv_cache_free_gpu_memory_fraction": typed.kv_cache_free_gpu_memory_fraction,
            "revision": model.revision,
        }
        for key, value in serving.engine_args.items():
            options[key.removeprefix("--")] = value  # the rules keep these off the kit's flags
        options["extra_llm_api_options"] = OPTIONS_FILE
        return [model_path(spec), *serve_flags(options)]

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """TensorRT-LLM's own ``serve`` parser and ``TorchLlmArgs`` fields on every launch
        where ``tensorrt_llm`` is importable; where it is not, the options file's top-level
        keys against the kit's table of TensorRT-LLM's (``spec/trtllm_options.py``), and
        ``ArgcheckUnavailable`` when that finds nothing (the flags were not checked)."""
        items = self.check_items(launches)
        try:
            return rejected(items, ctx.python, "TensorRT-LLM rejects the arguments")
        except ArgcheckUnavailable:
            found = [
                (launch, f"TensorRT-LLM would refuse the options file: {key_problem(key)}")
                for launch, _, item in items
                for key in unknown_keys(item["options"] or {})  # type: ignore[index]
            ]
            if found:
                return found
            raise

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, object]]:
        return [
            (one, "trtllm_args", {"argv": one.check_args, "options": yaml.safe_load(one.files[OPTIONS_FILE])})
            for one in launches
            if one.check_args is not None
        ]  # fmt: skip
