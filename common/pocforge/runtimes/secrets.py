"""Secrets a launch needs, passed by reference: never in a command line, a printed launch,
a plan file or a run folder.

A launch names the variables it needs (``NodeLaunch.secrets``); a container gets them as
``--env NAME`` (the engine copies the value from its own environment), a venv's process
inherits them. On a node, ``process.py`` takes each from the node's environment, else from
the POC's secrets file that bring-up writes with mode 0600 (:func:`secrets_file`). Two
sources:

- ``model.hf_token`` for a model the nodes fetch from the hub by its id (gated models
  need it; weights staged by bring-up need it only while staging): ``HF_TOKEN``;
- a ``runtime.env`` value written as a whole reference, ``HF_TOKEN: ${HF_TOKEN}``: the
  variable of that name, read from the controller's environment at bring-up.
"""

from __future__ import annotations

import os
import re

from pocforge.spec import PocSpec

NODE_SECRETS = "/opt/pocforge/secrets"  # beside the kit's other node folders, mode 0700
REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def secrets_file(spec: PocSpec) -> str:
    """The POC's secrets on every node: ``NAME=value`` lines, mode 0600."""
    return f"{NODE_SECRETS}/{spec.name}.env"


def split_env(env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(plain variables, {variable: the variable its value comes from}) of a ``runtime.env``."""
    plain, references = {}, {}
    for key, value in env.items():
        found = REFERENCE.match(value)
        if found:
            references[key] = found.group(1)
        else:
            plain[key] = value
    return plain, references


def _hub_token(spec: PocSpec) -> bool:
    """The nodes fetch the model from the hub by its id, with the POC's token."""
    from pocforge.frameworks.base import model_path

    return spec.model.hf_token is not None and not model_path(spec).startswith("/")


def launch_secrets(spec: PocSpec, env: dict[str, str]) -> list[str]:
    """The variables a deployment's launches take by reference (``env``: its
    ``runtime.env``)."""
    names = ["HF_TOKEN"] if _hub_token(spec) else []
    names += [key for key in split_env(env)[1] if key not in names]
    return names


def secret_values(spec: PocSpec) -> dict[str, str]:
    """What bring-up writes into :func:`secrets_file`: every secret the POC's launches
    take, with its value here (a reference whose variable is not set here is left out;
    the node then says which one it lacks)."""
    values: dict[str, str] = {}
    if _hub_token(spec):
        values["HF_TOKEN"] = spec.model.hf_token.get_secret_value()  # type: ignore[union-attr]
    for section in (spec.serving, spec.training):
        if section is None:
            continue
        for key, source in split_env(section.runtime.env)[1].items():
            if source in os.environ:
                values[key] = os.environ[source]
    return values
