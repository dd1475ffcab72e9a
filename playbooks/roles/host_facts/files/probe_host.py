#!/usr/bin/env python3
"""Read-only host probe: OS, kernel, CPU, NUMA, tuning knobs, disk space and network
interfaces, printed as JSON.

Usage: probe_host.py PATH[:PATH...]   (the paths whose free space is reported)
Standard library only: it runs with the host's own python3.

``interfaces``: one entry per ``/sys/class/net`` device (name, operstate upper-cased as
iproute2 prints it, mtu) with its IPv4 addresses as ``a.b.c.d/prefix``, from ``ip -j addr
show`` (iproute2's JSON) when that works, else from the SIOCGIFADDR / SIOCGIFNETMASK ioctls
(the primary address only); ``interfaces_source`` says which.
"""

import glob
import ipaddress
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys

NET_ROOT = "/sys/class/net"
# ioctl request numbers from <linux/sockios.h>
SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B


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


def ip_addr_json():
    """``ip -j addr show`` parsed, or None (no iproute2, or one too old for ``-j``)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    tool = shutil.which("ip", path=search)
    if not tool:
        return None
    try:
        proc = subprocess.run(
            [tool, "-j", "addr", "show"], capture_output=True, text=True, timeout=20, check=False
        )
        doc = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return doc if isinstance(doc, list) else None


def ioctl_ipv4(name):
    """The interface's primary IPv4 address as ['a.b.c.d/prefix'] (none: [])."""
    try:
        import fcntl
    except ImportError:
        return []
    packed = struct.pack("256s", name.encode()[:15])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            addr = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, packed)[20:24]
            mask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, packed)[20:24]
    except OSError:
        return []
    network = ipaddress.IPv4Network(f"0.0.0.0/{socket.inet_ntoa(mask)}")
    return [f"{socket.inet_ntoa(addr)}/{network.prefixlen}"]


def interfaces(net_root=NET_ROOT, ip_doc=None):
    """The network interfaces and their IPv4 addresses, and where the addresses came from.

    ``ip_doc``: ``ip -j addr show`` already parsed; when None it is run, but only for this
    host's own ``/sys/class/net`` (another tree's addresses are not this host's)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(net_root, "*"))):
        mtu = read(os.path.join(path, "mtu"))
        found[os.path.basename(path)] = {
            "name": os.path.basename(path),
            "state": (read(os.path.join(path, "operstate")) or "unknown").upper(),
            "mtu": int(mtu) if mtu and mtu.isdigit() else None,
            "ipv4": [],
        }
    own = os.path.realpath(net_root) == os.path.realpath(NET_ROOT)
    if ip_doc is None and own:
        ip_doc = ip_addr_json()
    if ip_doc is not None:
        for link in ip_doc:
            name = link.get("ifname")
            if not name:
                continue
            entry = found.setdefault(name, {"name": name, "state": None, "mtu": None})
            entry["state"] = link.get("operstate") or entry["state"]
            entry["mtu"] = link.get("mtu", entry["mtu"])
            entry["ipv4"] = [
                f"{a['local']}/{a['prefixlen']}"
                for a in link.get("addr_info") or []
                if a.get("family") == "inet" and a.get("local") and a.get("prefixlen") is not None
            ]
        return sorted(found.values(), key=lambda e: e["name"]), "ip"
    if own:
        for entry in found.values():
            entry["ipv4"] = ioctl_ipv4(entry["name"])
        return sorted(found.values(), key=lambda e: e["name"]), "ioctl"
    return sorted(found.values(), key=lambda e: e["name"]), "sysfs"


def probe(paths, net_root=NET_ROOT, ip_doc=None):
    """The facts this script prints (``net_root`` and ``ip_doc``: see ``interfaces``)."""
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
    facts["interfaces"], facts["interfaces_source"] = interfaces(net_root, ip_doc)
    return facts


def main():
    paths = [p for p in (sys.argv[1] if len(sys.argv) > 1 else "/").split(":") if p]
    json.dump(probe(paths), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
