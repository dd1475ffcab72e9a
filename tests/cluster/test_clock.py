"""A node's clock read as the cluster runner reads it (Cristian's algorithm over the node's
own python3): this machine's clock against itself, a node whose clock runs 30 s ahead, a
node that does not answer, and the SSH command built from the inventory's variables."""

from __future__ import annotations

import shutil
import sys

import pytest

from pocforge.cluster.clock import PROBE, node_command, read_clock
from pocforge.frameworks.base import InventoryHost

pytestmark = pytest.mark.process  # each probe is a process of its own

PYTHON = shutil.which("python3") or sys.executable


def test_this_machine_against_itself():
    reading = read_clock("here", [], PYTHON)
    assert 0 < reading.rtt_s < 1.0
    assert abs(reading.offset_s) <= reading.rtt_s / 2 + 1e-3  # the same clock


def test_a_node_whose_clock_runs_ahead(tmp_path):
    """A stand-in for the node's python3 that answers the probe with its clock 30 s ahead."""
    node = tmp_path / "python3"
    node.write_text(
        f"#!{PYTHON}\nimport sys, time\nprint('ready', flush=True)\n"
        "for _ in sys.stdin: print(repr(time.time() + 30.0), flush=True)\n"
    )
    node.chmod(0o755)
    reading = read_clock("ahead", [], str(node))
    assert reading.offset_s == pytest.approx(30.0, abs=reading.rtt_s / 2 + 1e-3)


def test_a_node_that_does_not_answer():
    """ssh's own failure (exit 255 and its message): the node is named with the reason."""
    refused = ["sh", "-c", "echo 'ssh: connect to host gone port 22: Connection refused' >&2;"
               " exit 255", "ssh"]  # fmt: skip
    with pytest.raises(OSError, match="gone: no clock .*Connection refused"):
        read_clock("gone", refused)


def test_the_ssh_command_is_the_playbooks_connection():
    host = InventoryHost(
        name="h2", address="198.51.100.12", port=2222, local=False,
        variables={"ansible_user": "root", "ansible_ssh_private_key_file": "/k/id",
                   "ansible_ssh_common_args": "-o StrictHostKeyChecking=yes"},
    )  # fmt: skip
    policy = {"ansible_ssh_common_args": "-o UserKnownHostsFile=/r/known_hosts"}
    argv = node_command(host, policy)
    assert argv[:3] == ["ssh", "-p", "2222"] and argv[-1] == "root@198.51.100.12"
    assert argv[argv.index("-i") + 1] == "/k/id"
    assert "UserKnownHostsFile=/r/known_hosts" in argv  # the run's policy wins
    assert node_command(InventoryHost("c", "c", 22, True), {}) == []
    assert "print('ready'" in PROBE
