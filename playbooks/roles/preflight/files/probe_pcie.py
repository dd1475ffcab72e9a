#!/usr/bin/env python3
"""Read-only PCIe link probe: every GPU's and NIC's link and the links above it, as JSON.

Usage: probe_pcie.py '{"gpu": ["0000:05:00.0", ...], "nic": [...], "sysfs": "/sys/bus/pci/devices"}'

For each device it reads, from sysfs, the device's own link (``current_link_speed``,
``max_link_speed``, ``current_link_width``, ``max_link_width``: what ``lspci -vv`` shows as
LnkSta and LnkCap) and then the same four values of every bridge above it up to the root
port (the parent directories of the device's sysfs path). A GPU behind a PCIe switch - the
internal one of an AMD board, or the baseboard switches of an 8-GPU system - reports a full
link to the switch while the switch's own uplink can be the narrow or slow one; only the
path shows it. ``gpu_busy_percent`` (amdgpu) is read where the driver provides it, to tell
an idle link from a busy one. Standard library only: it runs with the host's own python3.
"""

import json
import os
import re
import sys

_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def gts(text):
    """'2.5 GT/s PCIe' -> 2.5; 'Unknown' or missing -> None."""
    match = re.search(r"([\d.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def lanes(text):
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value or None  # 0: no link trained (or not a link at all)


def link(directory):
    """The four link attributes of one sysfs device directory (None where absent)."""
    return {
        "bdf": os.path.basename(directory),
        "speed_gts": gts(read(os.path.join(directory, "current_link_speed"))),
        "max_speed_gts": gts(read(os.path.join(directory, "max_link_speed"))),
        "width": lanes(read(os.path.join(directory, "current_link_width"))),
        "max_width": lanes(read(os.path.join(directory, "max_link_width"))),
    }


def device(bdf, sysfs):
    """The device's link, the bridges above it and its busy percentage, or the reason why not."""
    entry = {"bdf": bdf, "path": [], "busy_percent": None, "error": None}
    base = os.path.join(sysfs, bdf or "")
    if not bdf or not os.path.isdir(base):
        entry["error"] = f"{base} does not exist"
        entry.update({k: None for k in ("speed_gts", "max_speed_gts", "width", "max_width")})
        return entry
    own = link(base)
    entry.update({k: v for k, v in own.items() if k != "bdf"})
    if own["max_speed_gts"] is None and own["max_width"] is None:
        entry["error"] = f"{base}: no link attributes (max_link_speed, max_link_width)"
    busy = read(os.path.join(base, "gpu_busy_percent"))
    entry["busy_percent"] = int(busy) if busy and busy.isdigit() else None
    parent = os.path.dirname(os.path.realpath(base))
    while _BDF.match(os.path.basename(parent)):
        hop = link(parent)
        if any(hop[k] is not None for k in ("speed_gts", "max_speed_gts", "width", "max_width")):
            entry["path"].append(hop)
        parent = os.path.dirname(parent)
    return entry


def main():
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    sysfs = args.get("sysfs") or "/sys/bus/pci/devices"
    out = {kind: [device(bdf, sysfs) for bdf in (args.get(kind) or [])] for kind in ("gpu", "nic")}
    out["sysfs"] = sysfs
    out["readable"] = os.path.isdir(sysfs)
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
