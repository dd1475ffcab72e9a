"""The nodes' SSH host keys: a known-hosts file per POC, checked on every connection.

Ansible reaches the nodes with OpenSSH, which does the checking; the kit says how, through
the variables every playbook gets (extra variables: they win over any inventory's):

- ``tofu`` (default): ``StrictHostKeyChecking=accept-new`` — a node's key is recorded the
  first time (trust on first use) and a different key later is refused;
- ``strict``: ``StrictHostKeyChecking=yes`` — only keys already in the file;
- ``off``: nothing is checked (``StrictHostKeyChecking=no``, ``/dev/null``) — the kit prints
  and records that it was off.

The file is written unhashed (``HashKnownHosts=no``) so a reviewer sees which host each
key is for; the fingerprints go into the run (``cluster/known_hosts.json``). A refused key
becomes one line naming the host, the file and how to accept a legitimately new key.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

CHANGED = ("REMOTE HOST IDENTIFICATION HAS CHANGED", "Host key verification failed")
_MODE = {"tofu": "accept-new", "strict": "yes"}


class Fingerprint(BaseModel):
    host: str
    type: str
    sha256: str


def policy_vars(mode: str, path: Path | None) -> dict[str, object]:
    """The Ansible variables that make every SSH connection check (or not) the host keys."""
    if mode == "off" or path is None:
        return {
            "ansible_host_key_checking": False,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        }
    return {
        "ansible_host_key_checking": True,
        "ansible_ssh_common_args": (
            f"-o StrictHostKeyChecking={_MODE[mode]} -o UserKnownHostsFile={Path(path).resolve()}"
            " -o HashKnownHosts=no"
        ),
    }


def known_hosts_path(spec) -> Path | None:
    """The POC's known-hosts file (created empty for ``tofu``); None when checking is off."""
    ssh = spec.cluster.ssh
    if ssh.host_keys == "off":
        return None
    path = Path(ssh.known_hosts)
    if not path.is_absolute() and spec.source_dir:
        path = Path(spec.source_dir) / path
    if ssh.host_keys == "tofu":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    return path


def fingerprints(path: Path | None) -> list[Fingerprint]:
    """``ssh-keygen -lf`` of the file: host, key type, SHA256 fingerprint per entry."""
    if path is None or not Path(path).is_file() or not Path(path).read_text().strip():
        return []
    done = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    found = []
    for line in done.stdout.splitlines():
        # "256 SHA256:abc… 198.51.100.11 (ED25519)"
        m = re.match(r"^\d+ SHA256:(\S+) (\S+) \((\S+)\)$", line.strip())
        if m:
            found.append(Fingerprint(host=m[2], type=m[3], sha256=m[1]))
    return found


def explain(message: str, host: str, path: Path | None) -> str | None:
    """One line for a connection OpenSSH refused over its host key; None for other errors."""
    if not any(mark in message for mark in CHANGED):
        return None
    where = path or "the known-hosts file"
    unknown = re.search(r"No \S+ host key is known for (\S+)", message)
    if unknown:
        return (
            f"{host}: its SSH host key is not in {where} and host keys are checked strictly: "
            f"add it once its fingerprint is confirmed (ssh-keyscan {unknown[1]} >> {where}), "
            "or set cluster.ssh.host_keys: tofu"
        )
    changed = re.search(r"Host key for (\S+) has changed", message)
    address = changed[1] if changed else host
    return (
        f"{host}: its SSH host key does not match {where} — a reinstalled node or a man in "
        f"the middle. Check the key with the node's owner; if it is the node's new key, "
        f"remove the old one (ssh-keygen -R {address} -f {where}) and run again"
    )
