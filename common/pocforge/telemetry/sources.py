"""Which telemetry sources the recorder tries, in which order, with which arguments: the plan
it runs on, here as on every cluster node (:mod:`pocforge.telemetry.recorder`).

Per vendor, the first source of its chain the machine has:

- AMD: ``amd-smi metric --<category> --json --watch N``, one process per category (a
  combined query is known to break amd-smi's CSV output, and one category failing leaves
  the others); else the AMD Device Metrics Exporter's ``/metrics``; else ``rocm-smi
  --json``, run once per interval (it has no loop mode; older stacks only).
- NVIDIA: ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits -lms N`` (its own
  loop, timestamps to the millisecond, ``TZ=UTC``); else dcgm-exporter's ``/metrics``.
- Always the host: CPU utilisation and memory from ``/proc``, and CPU package energy from
  RAPL where ``/sys/class/powercap`` has readable package zones.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from pocforge.telemetry.parsers import NVIDIA_SMI_ARGS
from pocforge.telemetry.recorder import POWERCAP, TOOL_DIRS

DEFAULT_INTERVAL_S = 1.0
# amd-smi metric categories, each its own process (amdsmi_cli/amdsmi_parser.py flags).
AMD_SMI_CATEGORIES = ("power", "energy", "usage", "mem-usage", "clock", "temperature")
ROCM_SMI_ARGS = (
    "--showpower",
    "--showuse",
    "--showmemuse",
    "--showtemp",
    "--showmeminfo",
    "vram",
    "--json",
)
AMD_EXPORTER_URL = "http://127.0.0.1:5000/metrics"  # the exporter's default port
DCGM_EXPORTER_URL = "http://127.0.0.1:9400/metrics"
RAW_NAME = "telemetry.{kind}.raw.jsonl"  # in a node's workdir, beside its launches


def recorder_script() -> str:
    """The recorder the workload role copies to every node (this kit's own file)."""
    return str(resources.files("pocforge.telemetry").joinpath("recorder.py"))


def recorder_plan(
    interval_s: float,
    out: str,
    *,
    tool_dirs: tuple[str, ...] | list[str] = TOOL_DIRS,
    amd_exporter_url: str = AMD_EXPORTER_URL,
    dcgm_exporter_url: str = DCGM_EXPORTER_URL,
    powercap: str = POWERCAP,
) -> dict[str, Any]:
    """The recorder's plan: per vendor its sources in the order of the module notes."""
    seconds = str(max(1, round(interval_s)))  # amd-smi's --watch takes whole seconds
    ms = str(max(1, round(interval_s * 1000)))
    amd = [
        {
            "vendor": "AMD",
            "name": "amd-smi",
            "tool": "amd-smi",
            "mode": "loop",
            "framing": "json",
            "argvs": [
                {"args": ["metric", f"--{c}", "--json", "--watch", seconds], "detail": c}
                for c in AMD_SMI_CATEGORIES
            ],
        },
        {
            "vendor": "AMD",
            "name": "amd-metrics-exporter",
            "url": amd_exporter_url,
            "mode": "scrape",
        },
        {
            "vendor": "AMD",
            "name": "rocm-smi",
            "tool": "rocm-smi",
            "mode": "poll",
            "argvs": [{"args": list(ROCM_SMI_ARGS)}],
        },
    ]
    nvidia = [
        {
            "vendor": "NVIDIA",
            "name": "nvidia-smi",
            "tool": "nvidia-smi",
            "mode": "loop",
            "env": {"TZ": "UTC"},
            "argvs": [{"args": [*NVIDIA_SMI_ARGS, "-lms", ms]}],
        },
        {"vendor": "NVIDIA", "name": "dcgm-exporter", "url": dcgm_exporter_url, "mode": "scrape"},
    ]
    return {
        "out": out,
        "interval_s": interval_s,
        "chains": [amd, nvidia],
        "tool_dirs": list(tool_dirs),
        "powercap": powercap,
    }
