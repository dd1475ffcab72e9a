"""The one reader of an Ansible inventory's hosts: addresses, ports inherited from groups."""

from __future__ import annotations

from pocforge.frameworks.base import InventoryHost, inventory_addresses, inventory_hosts


def test_group_vars_reach_their_hosts_and_a_host_overrides_them(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(
        "all:\n"
        "  vars: {ansible_port: 2222}\n"
        "  hosts:\n"
        "    ctl: {ansible_connection: local}\n"
        "  children:\n"
        "    gpus:\n"
        "      hosts:\n"
        "        n1: {ansible_host: 198.51.100.21}\n"
        "        n2: {ansible_host: 198.51.100.22, ansible_port: 22}\n"
    )
    assert inventory_hosts(path) == [
        InventoryHost("ctl", "ctl", 2222, local=True),
        InventoryHost("n1", "198.51.100.21", 2222, local=False),
        InventoryHost("n2", "198.51.100.22", 22, local=False),
    ]
    assert inventory_addresses(path) == ["ctl", "198.51.100.21", "198.51.100.22"]


def test_an_unreadable_inventory_has_no_hosts(tmp_path):
    assert inventory_hosts(tmp_path / "missing.yml") == []
    (tmp_path / "bad.yml").write_text("all: [unclosed\n")
    assert inventory_hosts(tmp_path / "bad.yml") == []
