"""A launch as the controller plans it and a node reads it back: one process on one node,
its command in its runtime, environment, generated files and health URL
(:class:`NodeLaunch`), and the run folder placeholder its argv carries (:data:`WORKDIR`).

Standard library only: it is copied to the nodes beside ``process.py`` and
``launch_check.py``, which read a node's launches with it.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Role = Literal[
    "convert",
    "server",
    "ray-head",
    "ray-worker",
    "headless",
    "prefill",
    "decode",
    "router",
    "launcher",
    "trainer",
]


@dataclass
class NodeLaunch:
    """One process to start on one node: command, environment and generated files."""

    deployment: Literal["serving", "training"]
    framework: str
    node_rank: int
    host: str
    role: Role
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(
        default_factory=dict
    )  # name -> content, written to the working directory
    health_url: str | None = None  # polled until it answers 200 (servers only)
    check_args: list[str] | None = None  # the part the framework's own parser validates
    # Where it runs (pocforge.runtimes): kind, image, the framework's own argv and env.
    runtime: dict | None = None
    instance: int | None = None  # which server of its pool (disaggregated prefill / decode)
    # A step's result (a path on the node): present, the step is done and is skipped
    creates: str | None = None
    # Variables passed by reference (pocforge.runtimes.secrets): taken on the node from its
    # environment, else from ``secrets_file``; never a value in the plan
    secrets: list[str] = field(default_factory=list)
    secrets_file: str | None = None
    # Its framework's argument check, run on the node before weights are staged
    # (launch_check.py): {"script": an argcheck script, "item": its input}
    check: dict | None = None

    def done(self) -> bool:
        """A step whose result (``creates``) is there already: it ran before."""
        return bool(self.creates) and Path(self.creates).exists()  # type: ignore[arg-type]

    def command(self) -> str:
        """The argv as one shell-quoted line."""
        return " ".join(shlex.quote(a) for a in self.argv)

    def command_line(self) -> str:
        """The command with its environment prefixed, as one shell line."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{env} {self.command()}".strip()

    def as_dict(self) -> dict:
        return {
            "deployment": self.deployment,
            "framework": self.framework,
            "node_rank": self.node_rank,
            "host": self.host,
            "role": self.role,
            "argv": self.argv,
            "env": self.env,
            "files": self.files,
            "health_url": self.health_url,
            **({"runtime": self.runtime} if self.runtime else {}),
            **({"instance": self.instance} if self.instance is not None else {}),
            **({"creates": self.creates} if self.creates else {}),
            **(
                {"secrets": self.secrets, "secrets_file": self.secrets_file} if self.secrets else {}
            ),
            **({"check": self.check} if self.check else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> NodeLaunch:
        """The inverse of :meth:`as_dict` (a node reads its planned launches back)."""
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def container_of(launch: NodeLaunch) -> tuple[str, str] | None:
    """(engine, container name) of a container launch (``runtimes.container.wrap``), else None."""
    runtime = launch.runtime or {}
    if runtime.get("kind") != "container":
        return None
    return runtime["engine"], runtime["name"]


# In a launch's argv, the folder the process starts in and its generated files are written
# to (a container mounts it at the same path); replaced when the process starts.
WORKDIR = "{workdir}"
# On a cluster Slurm owns, the allocation's job id a launch's step names (--jobid): known
# on the node from the step the launcher runs in (SLURM_JOB_ID), replaced with the workdir.
SLURM_JOB = "{slurm_job}"


def on_node(launch: NodeLaunch, workdir: str) -> NodeLaunch:
    """``launch`` as it runs in ``workdir``: the :data:`WORKDIR` placeholder of its argv, its
    environment and the folders its container writes replaced (what the process manager
    starts, and what ``launch --print`` shows), and :data:`SLURM_JOB` where this process is
    in a Slurm job."""
    job = os.environ.get("SLURM_JOB_ID")

    def put(text: str) -> str:
        text = text.replace(WORKDIR, workdir)
        return text.replace(SLURM_JOB, job) if job else text

    runtime = dict(launch.runtime) if launch.runtime else None
    if runtime is not None:
        runtime["written"] = [put(f) for f in runtime.get("written", [])]
        runtime["inner_argv"] = [put(a) for a in runtime.get("inner_argv", [])]
    env = {key: put(value) for key, value in launch.env.items()}
    return dataclasses.replace(launch, argv=[put(a) for a in launch.argv], env=env, runtime=runtime)
