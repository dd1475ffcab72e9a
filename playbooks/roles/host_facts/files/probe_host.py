#!/usr/bin/env python3
"""Read-only host probe: OS, kernel, CPU, NUMA, tuning knobs and disk space, printed as JSON.

Usage: probe_host.py PATH[:PATH...]   (the paths whose free space is reported)
Standard library only: it runs with the host's own python3.
"""

import glob
import json
import os
import platform
import shutil
import socket
import sys


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return default


def selected(text):
    """'always [madvise] never' -> 'madvise'."""
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.strip()


def os_release():
    info = {}
    for line in (read("/etc/os-release", "") or "").splitlines():
        key, _, value = line.partition("=")
        info[key] = value.strip().strip('"')
    return info


def meminfo():
    out = {}
    for line in (read("/proc/meminfo", "") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            out[key] = int(parts[0])
    return out


def cpu_model():
    for line in (read("/proc/cpuinfo", "") or "").splitlines():
        if line.lower().startswith(("model name", "cpu model", "processor name")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def disk_free(path):
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe.rstrip("/")) or "/"
    usage = shutil.disk_usage(probe)
    return {
        "path": path,
        "measured_at": probe,
        "free_gb": round(usage.free / 1e9, 1),
        "total_gb": round(usage.total / 1e9, 1),
    }


def main():
    paths = [p for p in (sys.argv[1] if len(sys.argv) > 1 else "/").split(":") if p]
    governors = sorted(
        {read(p) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")}
        - {None}
    )
    nodes = sorted(glob.glob("/sys/devices/system/node/node[0-9]*"))
    mem = meminfo()
    release = os_release()
    cmdline = read("/proc/cmdline", "") or ""
    facts = {
        "hostname": socket.gethostname(),
        "os": release.get("PRETTY_NAME") or platform.platform(),
        "os_id": release.get("ID"),
        "os_version": release.get("VERSION_ID"),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "kernel_cmdline": cmdline,
        "kernel_cmdline_args": cmdline.split(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "numa_nodes": len(nodes) or 1,
        "numa_cpus": {os.path.basename(n): read(os.path.join(n, "cpulist")) for n in nodes},
        "numa_balancing": read("/proc/sys/kernel/numa_balancing"),
        "thp_enabled": selected(read("/sys/kernel/mm/transparent_hugepage/enabled")),
        "thp_defrag": selected(read("/sys/kernel/mm/transparent_hugepage/defrag")),
        "hugepages_total": mem.get("HugePages_Total"),
        "hugepage_size_kb": mem.get("Hugepagesize"),
        "mem_total_gb": round(mem.get("MemTotal", 0) / 1e6, 1),
        "cpu_governors": governors,
        "disks": [disk_free(p) for p in paths],
        "python": sys.version.split()[0],
    }
    json.dump(facts, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
