#!/usr/bin/env python3
"""Read-only GPU stack probe (amd-smi / rocm-smi, or nvidia-smi), printed as JSON.

Usage: probe_gpu.py '{"search_paths": [...], "log_patterns": [...], "rocm_root": "/opt/rocm"}'
Reports count, models, driver / firmware / ROCm-or-CUDA versions, the kernel driver and
its device nodes, PCIe link state per GPU, ECC counters, and kernel-log lines that match
GPU reset / hang patterns. Where something cannot be read it says why (``errors``, the
``error`` of ``ecc`` and ``kernel_log``, ``service_errors``), and it lists the GPUs on the PCI
bus (``pci_gpus``) so that "no GPU tool" is told apart from "no GPU". Standard library only.
"""

import json
import os
import re
import shutil
import subprocess
import sys


def run(argv, timeout=60):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if proc.returncode != 0:
        return None, (proc.stderr or proc.stdout).strip()[:500]
    return proc.stdout, None


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return default


def find_tool(name, search_paths):
    for directory in search_paths:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def gts(text):
    """'32.0 GT/s PCIe' -> 32.0; '16 GT/s' -> 16.0; None if unknown."""
    match = re.search(r"([\d.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def integer(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def pcie_sysfs(bdf):
    base = f"/sys/bus/pci/devices/{bdf}"
    if not bdf or not os.path.isdir(base):
        return {
            "bdf": bdf,
            "speed_gts": None,
            "max_speed_gts": None,
            "width": None,
            "max_width": None,
        }
    return {
        "bdf": bdf,
        "speed_gts": gts(read(f"{base}/current_link_speed")),
        "max_speed_gts": gts(read(f"{base}/max_link_speed")),
        "width": integer(read(f"{base}/current_link_width")),
        "max_width": integer(read(f"{base}/max_link_width")),
    }


def gpu_entries(data):
    """amd-smi JSON is a list of per-GPU objects, or (newer) a dict holding that list."""
    if isinstance(data, dict):
        for value in data.values():
            if isinstance(value, list):
                return value
        return []
    return data if isinstance(data, list) else []


def full_bdf(bdf):
    if bdf and re.fullmatch(r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d", bdf):
        return "0000:" + bdf
    return bdf


def probe_amd(tool, rocm_root, facts):
    out, err = run([tool, "static", "--json"])
    if out is None:
        facts["errors"].append(f"{os.path.basename(tool)} static: {err}")
        return
    try:
        entries = gpu_entries(json.loads(out))
    except ValueError as exc:
        facts["errors"].append(f"amd-smi static: not JSON ({exc})")
        return
    drivers, firmware = set(), set()
    for entry in entries:
        asic = entry.get("asic") or {}
        bus = entry.get("bus") or {}
        facts["models"].append(asic.get("market_name") or asic.get("name") or "unknown")
        bdf = full_bdf(bus.get("bdf") or entry.get("bdf"))
        facts["bdfs"].append(bdf)
        driver = entry.get("driver") or {}
        if driver.get("version"):
            drivers.add(str(driver["version"]))
        fw = entry.get("ifwi") or entry.get("vbios") or {}
        if fw.get("version"):
            firmware.add(str(fw["version"]))
        facts["pcie"].append(pcie_sysfs(bdf))
    facts["count"] = len(entries)
    facts["driver_version"] = ",".join(sorted(drivers)) or None
    facts["firmware_version"] = ",".join(sorted(firmware)) or None
    facts["runtime"] = "rocm"
    facts["runtime_version"] = read(os.path.join(rocm_root, ".info", "version"))
    if not facts["runtime_version"]:
        text, _ = run([tool, "version"])
        match = re.search(r"ROCm version:\s*([\w.\-]+)", text or "")
        facts["runtime_version"] = match.group(1) if match else None
    ecc_out, ecc_err = run([tool, "metric", "--ecc", "--json"])
    try:
        ecc_entries = gpu_entries(json.loads(ecc_out)) if ecc_out is not None else None
    except ValueError as exc:
        ecc_entries, ecc_err = None, f"not JSON ({exc})"
    if ecc_entries is None:
        facts["ecc"]["error"] = f"amd-smi metric --ecc: {ecc_err or 'no output'}"
    else:
        corr = uncorr = 0
        for entry in ecc_entries:
            ecc = entry.get("ecc") or {}
            corr += integer(ecc.get("total_correctable_count")) or 0
            uncorr += integer(ecc.get("total_uncorrectable_count")) or 0
        facts["ecc"].update(correctable=corr, uncorrectable=uncorr, source="amd-smi metric --ecc")


def probe_rocm_smi(tool, rocm_root, facts):
    out, err = run([tool, "--showproductname", "--showdriverversion", "--showbus", "--json"])
    if out is None:
        facts["errors"].append(f"rocm-smi: {err}")
        return
    data = json.loads(out)
    cards = {k: v for k, v in data.items() if k.startswith("card")}
    for card in cards.values():
        facts["models"].append(card.get("Card Series") or card.get("Card series") or "unknown")
        bdf = full_bdf(card.get("PCI Bus"))
        facts["bdfs"].append(bdf)
        facts["pcie"].append(pcie_sysfs(bdf))
    facts["count"] = len(cards)
    facts["driver_version"] = (data.get("system") or {}).get("Driver version")
    facts["runtime"] = "rocm"
    facts["runtime_version"] = read(os.path.join(rocm_root, ".info", "version"))
    facts["ecc"]["error"] = "read with amd-smi only (found rocm-smi, no amd-smi)"


NVIDIA_FIELDS = (
    "index,name,pci.bus_id,driver_version,vbios_version,pcie.link.gen.current,"
    "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
    "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,utilization.gpu"
)
# PCIe generation -> GT/s per lane
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def probe_nvidia(tool, facts):
    out, err = run([tool, f"--query-gpu={NVIDIA_FIELDS}", "--format=csv,noheader,nounits"])
    if out is None:
        facts["errors"].append(f"nvidia-smi: {err}")
        return
    drivers, firmware = set(), set()
    corr = uncorr = 0
    for line in out.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 11:
            continue
        facts["models"].append(cols[1])
        bdf = cols[2].lower()
        if re.match(r"0{8}:", bdf):
            bdf = bdf[4:]
        facts["bdfs"].append(bdf)
        drivers.add(cols[3])
        firmware.add(cols[4])
        gen, gen_max = integer(cols[5]), integer(cols[6])
        facts["pcie"].append(
            {
                "bdf": bdf,
                "speed_gts": GEN_GTS.get(gen),
                "max_speed_gts": GEN_GTS.get(gen_max),
                "width": integer(cols[7]),
                "max_width": integer(cols[8]),
            }
        )
        corr += integer(cols[9]) or 0
        uncorr += integer(cols[10]) or 0
        if len(cols) > 11 and integer(cols[11]) is not None:
            facts["busy_percent"][bdf] = integer(cols[11])
    facts["count"] = len(facts["models"])
    facts["driver_version"] = ",".join(sorted(drivers)) or None
    facts["firmware_version"] = ",".join(sorted(firmware)) or None
    facts["ecc"].update(correctable=corr, uncorrectable=uncorr, source="nvidia-smi")
    facts["runtime"] = "cuda"
    banner, _ = run([tool])
    match = re.search(r"CUDA Version:\s*([\d.]+)", banner or "")
    facts["runtime_version"] = match.group(1) if match else None
    for service in ("nvidia-persistenced", "nvidia-fabricmanager"):
        state, why = service_state(service)
        facts["services"][service] = state
        if why:
            facts["service_errors"][service] = why


def service_state(name):
    """(state, why-unknown): systemctl's answer ("active", "inactive", "failed", ...) even when
    it exits non-zero (it does for every state but active); "unknown" and the reason when
    there is no systemctl or it cannot answer (a container without systemd)."""
    tool = shutil.which("systemctl")
    if not tool:
        return "unknown", "systemctl not found (no systemd on this host or container)"
    try:
        proc = subprocess.run(
            [tool, "is-active", name], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "unknown", f"systemctl is-active {name}: {exc}"
    state = (proc.stdout or "").strip().splitlines()
    if state:
        return state[0].strip(), None
    why = ((proc.stderr or "").strip().splitlines() or ["no answer"])[0][:200]
    return "unknown", f"systemctl is-active {name}: {why}"


# PCI vendor ids and the device classes of GPUs and compute accelerators (lspci -nn): display
# controllers (0x03xx: VGA, 3D - "3D controller [0302]" on an A100 SXM4, open-mpi/hwloc issue
# #653 - and display) and processing accelerators ("Processing accelerators [1200]" on an
# MI325X, apache/cloudstack issue #11701).
PCI_VENDORS = {"0x1002": "amd", "0x10de": "nvidia"}
PCI_GPU_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")


def pci_gpus(sysfs="/sys/bus/pci/devices"):
    """The AMD and NVIDIA GPUs on the PCI bus, whatever tool is installed: [{bdf, vendor}]."""
    found = []
    try:
        names = sorted(os.listdir(sysfs))
    except OSError:
        return found
    for name in names:
        vendor = PCI_VENDORS.get((read(os.path.join(sysfs, name, "vendor")) or "").lower())
        klass = (read(os.path.join(sysfs, name, "class")) or "").lower()
        if vendor and klass.startswith(PCI_GPU_CLASSES):
            found.append({"bdf": name, "vendor": vendor})
    return found


def kernel_log(patterns):
    text, err = run(["dmesg"], timeout=30)
    if text is None:
        if os.geteuid() != 0 and read("/proc/sys/kernel/dmesg_restrict") == "1":
            err = f"{err or 'dmesg failed'} (not root, and kernel.dmesg_restrict=1)"
        return {"readable": False, "error": err, "count": None, "matches": []}
    regex = re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None
    hits = [line for line in text.splitlines() if regex and regex.search(line)]
    return {"readable": True, "count": len(hits), "matches": hits[-10:]}


def main():
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    search = args.get("search_paths") or ["/opt/rocm/bin", "/usr/bin", "/usr/local/bin"]
    rocm_root = args.get("rocm_root") or "/opt/rocm"
    facts = {
        "vendor": "none",
        "tool": None,
        "count": 0,
        "models": [],
        "bdfs": [],
        "pcie": [],
        "driver_version": None,
        "firmware_version": None,
        "runtime": None,
        "runtime_version": None,
        "kernel_module": None,
        "kernel_module_loaded": False,
        "device_nodes": {},
        "services": {},
        "service_errors": {},
        "busy_percent": {},
        "errors": [],
        "ecc": {"correctable": None, "uncorrectable": None, "source": None, "error": None},
        "euid": os.geteuid(),
        "pci_gpus": pci_gpus(),
    }
    amd_smi = find_tool("amd-smi", search)
    rocm_smi = find_tool("rocm-smi", search)
    nvidia_smi = find_tool("nvidia-smi", search)
    if amd_smi or rocm_smi:
        facts.update(vendor="amd", tool=amd_smi or rocm_smi, kernel_module="amdgpu")
        if amd_smi:
            probe_amd(amd_smi, rocm_root, facts)
        else:
            probe_rocm_smi(rocm_smi, rocm_root, facts)
        facts["device_nodes"] = {
            "/dev/kfd": os.path.exists("/dev/kfd"),
            "/dev/dri": os.path.isdir("/dev/dri"),
        }
    elif nvidia_smi:
        facts.update(vendor="nvidia", tool=nvidia_smi, kernel_module="nvidia")
        probe_nvidia(nvidia_smi, facts)
        facts["device_nodes"] = {"/dev/nvidiactl": os.path.exists("/dev/nvidiactl")}
    else:
        facts["errors"].append(f"no amd-smi, rocm-smi or nvidia-smi in {', '.join(search)} or PATH")
    if facts["kernel_module"]:
        facts["kernel_module_loaded"] = os.path.isdir(f"/sys/module/{facts['kernel_module']}")
    facts["kernel_log"] = kernel_log(args.get("log_patterns") or [])
    json.dump(facts, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
