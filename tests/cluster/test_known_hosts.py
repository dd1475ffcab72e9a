"""The SSH host-key policy as Ansible variables, and the one line a refused key becomes
(the messages are OpenSSH's own, as the namespaced-node test captures them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.cluster.known_hosts import explain, known_hosts_path, policy_vars

CHANGED = (
    "Failed to connect to the host via ssh: @@@@@@@@@@@\\r\\n@    WARNING: REMOTE HOST "
    "IDENTIFICATION HAS CHANGED!     @\\r\\n… Host key for 198.51.100.12 has changed and you "
    "have requested strict checking.\\r\\nHost key verification failed."
)
UNKNOWN = (
    "Failed to connect to the host via ssh: No ED25519 host key is known for 198.51.100.13 "
    "and you have requested strict checking.\\r\\nHost key verification failed."
)


@pytest.mark.parametrize(("mode", "strict"), [("tofu", "accept-new"), ("strict", "yes")])
def test_checking_modes_name_the_pocs_file(tmp_path, mode, strict):
    found = policy_vars(mode, tmp_path / "known_hosts")
    assert found["ansible_host_key_checking"] is True
    args = found["ansible_ssh_common_args"]
    assert f"StrictHostKeyChecking={strict}" in args and "HashKnownHosts=no" in args
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in args


def test_off_checks_nothing():
    found = policy_vars("off", None)
    assert found["ansible_host_key_checking"] is False
    assert "UserKnownHostsFile=/dev/null" in found["ansible_ssh_common_args"]


def test_a_changed_and_an_unknown_key_each_get_their_line():
    changed = explain(CHANGED, "h2", Path("/pocs/p/known_hosts"))
    assert changed.startswith("h2: its SSH host key does not match /pocs/p/known_hosts")
    assert "ssh-keygen -R 198.51.100.12 -f /pocs/p/known_hosts" in changed
    unknown = explain(UNKNOWN, "h3", Path("/k"))
    assert "is not in /k and host keys are checked strictly" in unknown
    assert "ssh-keyscan 198.51.100.13 >> /k" in unknown
    assert explain("Connection timed out", "h1", Path("/k")) is None


def test_the_pocs_file_defaults_to_its_folder(tmp_path):
    from types import SimpleNamespace

    ssh = SimpleNamespace(host_keys="tofu", known_hosts="known_hosts")
    spec = SimpleNamespace(cluster=SimpleNamespace(ssh=ssh), source_dir=tmp_path)
    path = known_hosts_path(spec)
    assert path == tmp_path / "known_hosts" and path.is_file()  # created for first contact
    ssh.host_keys = "off"
    assert known_hosts_path(spec) is None
