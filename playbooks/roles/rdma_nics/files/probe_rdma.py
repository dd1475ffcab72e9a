#!/usr/bin/env python3
"""Read-only RDMA NIC probe from sysfs (what ibv_devinfo and show_gids report), printed as JSON.

Usage: probe_rdma.py [SYSFS_ROOT]   (default /sys/class/infiniband)
Per port: state, physical state, rate in Gb/s, link layer (InfiniBand / Ethernet = RoCE) and,
for Ethernet (RoCE) ports, the populated GID table entries as show_gids lists them: index,
GID, type ("RoCE v2" / "IB/RoCE v1"), the net device it belongs to and, for an IPv4-mapped
GID (``::ffff:a.b.c.d``), the IPv4 address (the entry NCCL_IB_GID_INDEX names); per device:
firmware and the PCIe link state of its function. Standard library only.

Layout (Documentation/ABI/stable/sysfs-class-infiniband and ABI/testing/ of the kernel):
``<dev>/ports/<N>/{state,phys_state,rate,link_layer}``, ``<dev>/ports/<N>/gids/<K>``,
``<dev>/ports/<N>/gid_attrs/types/<K>`` and ``gid_attrs/ndevs/<K>``. A GID slot that is not
populated reads as all zeros and its ``types`` / ``ndevs`` files fail to read (EINVAL);
those slots are skipped, as show_gids and NCCL skip them.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
# An IPv4-mapped GID: 80 zero bits, 16 one bits, then the IPv4 address (RFC 4291 2.5.5.2).
IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$")


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return default


def number(pattern, text, cast=float):
    match = re.search(pattern, text or "")
    return cast(match.group(1)) if match else None


def label(text):
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    return (text or "").split(":")[-1].strip()


def mapped_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID ('...:ffff:0b00:0048' -> '11.0.0.72'), else None."""
    match = IPV4_MAPPED.match((gid or "").lower())
    if not match:
        return None
    high, low = int(match.group(1), 16), int(match.group(2), 16)
    return f"{high >> 8}.{high & 0xFF}.{low >> 8}.{low & 0xFF}"


def gid_table(port):
    """The populated GID entries of one port, by index."""
    entries = []
    for path in glob.glob(os.path.join(port, "gids", "*")):
        name = os.path.basename(path)
        if not name.isdigit():
            continue
        gid = read(path)
        if not gid or gid == ZERO_GID:
            continue
        index = int(name)
        entries.append(
            {
                "index": index,
                "gid": gid,
                "type": read(os.path.join(port, "gid_attrs", "types", name)),
                "ndev": read(os.path.join(port, "gid_attrs", "ndevs", name)),
                "ipv4": mapped_ipv4(gid),
            }
        )
    return sorted(entries, key=lambda e: e["index"])


def port_facts(port):
    link_layer = read(os.path.join(port, "link_layer"))
    return {
        "port": os.path.basename(port),
        "state": label(read(os.path.join(port, "state"), "")),
        "phys_state": label(read(os.path.join(port, "phys_state"), "")),
        "rate_gbps": number(r"([\d.]+)\s*Gb", read(os.path.join(port, "rate"))),
        "link_layer": link_layer,
        # RoCE addresses by GID; an InfiniBand port is addressed by LID, NCCL needs no index
        "gids": gid_table(port) if link_layer == "Ethernet" else [],
    }


def device_facts(dev):
    pci = os.path.realpath(os.path.join(dev, "device"))
    return {
        "name": os.path.basename(dev),
        "firmware": read(os.path.join(dev, "fw_ver")),
        "bdf": os.path.basename(pci),
        "pcie": {
            "speed_gts": number(r"([\d.]+)\s*GT/s", read(os.path.join(pci, "current_link_speed"))),
            "max_speed_gts": number(r"([\d.]+)\s*GT/s", read(os.path.join(pci, "max_link_speed"))),
            "width": number(r"(\d+)", read(os.path.join(pci, "current_link_width")), int),
            "max_width": number(r"(\d+)", read(os.path.join(pci, "max_link_width")), int),
        },
        "ports": [
            port_facts(port)
            for port in sorted(
                glob.glob(os.path.join(dev, "ports", "*")),
                key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else 0,
            )
        ],
    }


def ibv_devinfo_version():
    tool = shutil.which("ibv_devinfo")
    if not tool:
        return None, None
    try:
        proc = subprocess.run(
            [tool, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return tool, None
    lines = (proc.stdout or "").strip().splitlines()
    return tool, (lines[0] if lines else None)


def probe(root="/sys/class/infiniband", tools=True):
    """The facts this script prints. ``tools=False`` leaves ibv_devinfo out (a sysfs tree that
    is not this host's, as in the tests: the host's tool says nothing about it)."""
    devices = [device_facts(dev) for dev in sorted(glob.glob(os.path.join(root, "*")))]
    tool, version = ibv_devinfo_version() if tools else (None, None)
    active = [p for d in devices for p in d["ports"] if p["state"] == "ACTIVE"]
    return {
        "devices": devices,
        "device_count": len(devices),
        "active_ports": len(active),
        "active_rates_gbps": sorted(p["rate_gbps"] for p in active if p["rate_gbps"]),
        "ibv_devinfo": tool,
        "ibv_devinfo_version": version,
    }


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/sys/class/infiniband"
    json.dump(probe(root), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
