"""Keep secrets out of every file of a run.

Two sources of secrets: the spec's secret fields (``model.hf_token``,
``cluster.ssh.password`` and any field the spec marks ``secret``) and environment
variables whose *name* looks like a secret (``HF_TOKEN``, ``*_API_KEY``, ``*PASSWORD*``…).
:class:`Redactor` replaces every occurrence of their values in text and bytes with
``***``; the store passes everything it writes through it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, SecretStr

SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|SESSION|COOKIE)",
    re.IGNORECASE,
)
MASK = "***"
_MIN_LEN = 4  # shorter values would mask ordinary text ("1", "yes")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def spec_secret_values(model: BaseModel | None) -> list[str]:
    """Values of every SecretStr field of a pydantic model tree (the POC spec)."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, SecretStr):
            found.append(node.get_secret_value())
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name, None))
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list | tuple):
            for value in node:
                walk(value)

    walk(model)
    return found


def env_secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    return [value for name, value in env.items() if is_secret_name(name)]


class Redactor:
    """Replace known secret values with ``***`` in text and bytes."""

    def __init__(self, values: Iterable[str] = ()):
        uniq = {v for v in values if isinstance(v, str) and len(v) >= _MIN_LEN}
        self.values = sorted(uniq, key=len, reverse=True)  # longest first: no partial leftovers
        self._bytes = [v.encode() for v in self.values]

    @classmethod
    def for_spec(cls, spec: BaseModel | None, env: Mapping[str, str] | None = None) -> Redactor:
        return cls([*spec_secret_values(spec), *env_secret_values(env)])

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def data(self, data: bytes) -> bytes:
        for value in self._bytes:
            if value in data:
                data = data.replace(value, MASK.encode())
        return data

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment with secret-named variables masked and secret values scrubbed."""
        return {k: (MASK if is_secret_name(k) else self.text(v)) for k, v in env.items()}
