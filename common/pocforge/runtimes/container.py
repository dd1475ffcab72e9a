"""A launch inside a container: ``docker run`` / ``podman run`` with the platform's flags.

The platform's flags (devices, groups, capabilities, ulimits, IPC and network by GPU
vendor and engine, an RDMA fabric's, a framework image's own) are the rows of
:mod:`pocforge.frameworks.platform_settings`, each with its public source.

Weights, the run folder, the kit's wheels and the profiler's folder (a profiled serving
stage's traces) are mounted at the same paths as on the node, so the framework's arguments
need no translation and nothing it writes ends with the container. The kernels
distribution, when the deployment uses kit kernels, and for training the kit itself (its driver), are installed
from the mounted wheels before the framework starts (no registry needed on the node).
"""

from __future__ import annotations

import re
import shlex

from pocforge.frameworks.base import NodeLaunch
from pocforge.frameworks.launch_plan import WORKDIR
from pocforge.frameworks.platform_settings import container_flags
from pocforge.runtimes.resolve import WHEELS, ResolvedRuntime

# Images whose ENTRYPOINT sets the container up and then runs its arguments: kept. NGC's
# /opt/nvidia/nvidia_entrypoint.sh runs /opt/nvidia/entrypoint.d (its CUDA forward-
# compatibility check among them), then `exec "$@"`. Any other image's entrypoint is reset
# (`--entrypoint=`, docker's and podman's way; podman 4.3 here: an image whose ENTRYPOINT is
# `echo ENTRY` runs the command given only with it), so the launch's command is what runs:
# vLLM's images (vllm/vllm-openai, -rocm) start `vllm serve` with the arguments (vLLM docs,
# "Using Docker": `docker run … vllm/vllm-openai:latest --model …`), which would take the
# kit's command for a model's arguments.
KEPT_ENTRYPOINTS = ("nvcr.io/nvidia/",)

# Where the kit's wheels are installed inside a container: a scratch folder put first on
# PYTHONPATH, so the image's own environment (read-only, or the customer's) is left as it is.
SITE = "/tmp/pocforge-site"


def kit_install(python: str, *distributions: str) -> str:
    """The shell line that installs the kit's ``distributions`` from the mounted wheels for
    ``python`` (no index, no dependencies) and puts them on its path."""
    names = " ".join(distributions)
    return (
        f"{shlex.quote(python)} -m pip install --quiet --disable-pip-version-check --no-deps "
        f"--no-index --find-links {WHEELS} --target {SITE} {names} && "
        f"export PYTHONPATH={SITE}${{PYTHONPATH:+:$PYTHONPATH}}"
    )


def container_name(poc: str, launch: NodeLaunch) -> str:
    """A name teardown can find: ``pocforge-<poc>-<deployment>-<role>-<rank>``."""
    raw = f"pocforge-{poc}-{launch.deployment}-{launch.role}-{launch.node_rank}"
    if launch.instance is not None:  # several prefill or decode servers on one node
        raw += f"-{launch.instance}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)


def wrap(
    launch: NodeLaunch,
    runtime: ResolvedRuntime,
    *,
    poc: str,
    mounts: list[str],
    kernels: bool,
    written: list[str] | None = None,
    rdma: bool = False,
    gpus: bool = True,
) -> NodeLaunch:
    """``launch`` run in ``runtime``'s container; its environment goes in as ``--env``.
    ``written``: folders on the node the launch writes into (a profiler's): mounted, so
    what it writes outlives the container, and made before the start (``runtime.written``:
    podman, unlike docker, refuses to mount a folder that is not there). ``rdma``: the
    deployment spans nodes over an RDMA fabric; ``gpus``: the launch uses the node's GPUs
    (the P/D router does not)."""
    assert runtime.kind == "container" and runtime.image
    name = container_name(poc, launch)
    argv = [runtime.engine, "run", "--rm", "--name", name]
    argv += container_flags(runtime.vendor, runtime.engine, launch.framework, gpus=gpus, rdma=rdma)
    for mount in [*mounts, *runtime.mounts]:
        argv += ["--volume", mount]
    if launch.files:  # generated files are written to the working directory on the node
        argv += ["--volume", f"{WORKDIR}:{WORKDIR}", "--workdir", WORKDIR]
    written = written or []
    for folder in written:
        argv += ["--volume", f"{folder}:{folder}"]
    env = {**runtime.env, **launch.env}
    for key in sorted(env):
        argv += ["--env", f"{key}={env[key]}"]
    for secret in launch.secrets:  # no value: the engine copies it from its own environment
        argv += ["--env", secret]
    # A training launch gets the kit (DeepSpeed's runs the kit's driver, Megatron-LM's
    # pretrain_gpt.py has it beside it), and so does any launch that runs a kit module (the
    # disaggregated deployment's router, a CPU vLLM's pocforge.frameworks.vllm_serve); the
    # kernels are the kernels distribution's. Both from the mounted wheels, without an index.
    runs_kit = any(arg.startswith("pocforge.") for arg in launch.argv)
    whole_kit = launch.deployment == "training" or runs_kit
    kit = ["pocforge", "pocforge-kernels"] if whole_kit else []
    kit = kit or (["pocforge-kernels"] if kernels else [])
    command = launch.argv
    if kit:
        # sh -c '<install> && exec "$@"' sh <argv...>: no quoting of the framework's argv.
        install = kit_install(launch.argv[0], *kit)
        command = ["sh", "-c", f'{install} && exec "$@"', "sh", *launch.argv]
    if not runtime.image.startswith(KEPT_ENTRYPOINTS):
        argv.append("--entrypoint=")
    argv += [runtime.image, *command]
    return NodeLaunch(
        deployment=launch.deployment,
        framework=launch.framework,
        node_rank=launch.node_rank,
        host=launch.host,
        role=launch.role,
        argv=argv,
        env={},
        files=launch.files,
        health_url=launch.health_url,
        check_args=launch.check_args,
        instance=launch.instance,
        creates=launch.creates,
        secrets=launch.secrets,
        secrets_file=launch.secrets_file,
        runtime={
            "kind": "container",
            "engine": runtime.engine,
            "name": name,
            "image": runtime.image,
            "inner_argv": launch.argv,
            "env": env,
            "written": written,
        },
    )
