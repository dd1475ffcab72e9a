#!/usr/bin/env python3
"""Read-only RDMA NIC probe from sysfs (what ibv_devinfo reports), printed as JSON.

Usage: probe_rdma.py [SYSFS_ROOT]   (default /sys/class/infiniband)
Per port: state, physical state, rate in Gb/s, link layer (InfiniBand / Ethernet = RoCE);
per device: firmware and the PCIe link state of its function. Standard library only.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return default


def number(pattern, text, cast=float):
    match = re.search(pattern, text or "")
    return cast(match.group(1)) if match else None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/sys/class/infiniband"
    devices = []
    for dev in sorted(glob.glob(os.path.join(root, "*"))):
        pci = os.path.realpath(os.path.join(dev, "device"))
        ports = []
        for port in sorted(glob.glob(os.path.join(dev, "ports", "*"))):
            ports.append(
                {
                    "port": os.path.basename(port),
                    "state": (read(os.path.join(port, "state"), "") or "").split(":")[-1].strip(),
                    "phys_state": (read(os.path.join(port, "phys_state"), "") or "")
                    .split(":")[-1]
                    .strip(),
                    "rate_gbps": number(r"([\d.]+)\s*Gb", read(os.path.join(port, "rate"))),
                    "link_layer": read(os.path.join(port, "link_layer")),
                }
            )
        devices.append(
            {
                "name": os.path.basename(dev),
                "firmware": read(os.path.join(dev, "fw_ver")),
                "bdf": os.path.basename(pci),
                "pcie": {
                    "speed_gts": number(
                        r"([\d.]+)\s*GT/s", read(os.path.join(pci, "current_link_speed"))
                    ),
                    "max_speed_gts": number(
                        r"([\d.]+)\s*GT/s", read(os.path.join(pci, "max_link_speed"))
                    ),
                    "width": number(r"(\d+)", read(os.path.join(pci, "current_link_width")), int),
                    "max_width": number(r"(\d+)", read(os.path.join(pci, "max_link_width")), int),
                },
                "ports": ports,
            }
        )
    tool = shutil.which("ibv_devinfo")
    version = None
    if tool:
        try:
            proc = subprocess.run(
                [tool, "--version"], capture_output=True, text=True, timeout=20, check=False
            )
            version = (proc.stdout or "").strip().splitlines()[0] if proc.stdout else None
        except (OSError, subprocess.TimeoutExpired):
            version = None
    active = [p for d in devices for p in d["ports"] if p["state"] == "ACTIVE"]
    json.dump(
        {
            "devices": devices,
            "device_count": len(devices),
            "active_ports": len(active),
            "active_rates_gbps": sorted(p["rate_gbps"] for p in active if p["rate_gbps"]),
            "ibv_devinfo": tool,
            "ibv_devinfo_version": version,
        },
        sys.stdout,
        sort_keys=True,
    )


if __name__ == "__main__":
    main()
