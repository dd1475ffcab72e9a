"""The kit's gloo benchmark behind nccl-tests' names (``<op>_perf``), as scripts the
collectives role writes on each CPU node (as it would build rccl-tests or nccl-tests on a
GPU node), each running :mod:`pocforge.cluster.gloo_perf` where the POC's framework runs:
the node's venv interpreter, or a container of the deployment's image with the kit's
wheels installed at start. mpirun's rank variables and the rendezvous go into a container
by name (``--env NAME``: the engine copies the value from mpirun's process); each rank's
container is named for its rank."""

from __future__ import annotations

import shlex
import sys

from pocforge.cluster.gloo_perf import OPS
from pocforge.frameworks.base import NodeLaunch
from pocforge.runtimes import container
from pocforge.runtimes.resolve import WHEELS, resolve
from pocforge.spec import PocSpec

# What a rank reads from its environment (gloo_perf: Open MPI's rank and size, the
# rendezvous; gloo's interface; the threads the rehearsal keeps to one).
PASSED = (
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GLOO_SOCKET_IFNAME",
    "OMP_NUM_THREADS",
)


def gloo_tools(spec: PocSpec) -> dict[str, str]:
    """``<op>_perf`` -> the script's text, in the runtime of the POC's serving (else its
    training) deployment."""
    deployment = "serving" if spec.serving is not None else "training"
    runtime = resolve(spec, deployment)
    tools = {}
    for op in OPS:
        argv = [runtime.node_python, "-m", "pocforge.cluster.gloo_perf", op]
        if runtime.kind == "kit":  # nodes that share this machine's disk
            argv[0] = sys.executable
        elif runtime.kind == "container":
            launch = NodeLaunch(
                deployment="training",  # the whole kit from the mounted wheels, as training has it
                framework="gloo",
                node_rank=0,
                host="",
                role=f"collectives-{op}",
                argv=argv,
                secrets=list(PASSED),
            )
            argv = container.wrap(
                launch,
                runtime,
                poc=spec.name,
                mounts=[f"{WHEELS}:{WHEELS}:ro"],
                kernels=False,
                gpus=False,
            ).argv
        line = shlex.join(argv)
        if runtime.kind == "container":  # one container per rank: named for it
            name = argv[argv.index("--name") + 1]
            line = line.replace(f"--name {name} ", f'--name {name}-"$OMPI_COMM_WORLD_RANK" ', 1)
        tools[f"{op}_perf"] = f'#!/bin/sh\nexec {line} "$@"\n'
    return tools
