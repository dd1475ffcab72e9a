"""One sample of a GPU telemetry tool's output -> normalized per-GPU :class:`GpuSample`.

One parser per source, each taking the tool's text and returning ``list[GpuSample]``:

- :func:`parse_amd_smi_metric_json` — ``amd-smi metric --json``, both shapes AMD has shipped:
  a list of per-GPU objects (amd-smi 24.x, ROCm 6.x) and ``{"gpu_data": [...]}`` (amd-smi
  26.x, ROCm 7.x); readings are ``{"value": v, "unit": u}`` or ``"N/A"``.
- :func:`parse_rocm_smi_json` — ``rocm-smi --json`` (``{"cardN": {"<label> (<unit>)": "v"}}``).
- :func:`parse_nvidia_smi_csv` — ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``:
  the recorder's form (:data:`NVIDIA_SMI_ARGS`, parsed by :data:`NVIDIA_SMI_QUERY_FIELDS`) and
  the header form with or without units in the cells.
- :func:`parse_dcgm_exporter` — dcgm-exporter's Prometheus text.
- :func:`parse_amd_metrics_exporter` — the AMD Device Metrics Exporter's Prometheus text.

``dcgmi dmon`` is not parsed: no text capture of its GPU rows was found in public issue
threads or NVIDIA's docs (only screenshots), and a parser tested on invented rows proves
nothing (see ``tests/data/README.md``).

Conventions every parser follows:

- A value the tool reports as unavailable (``N/A``, ``[N/A]``, ``[Not Supported]``, DCGM's
  blank sentinels) becomes ``None``; a reading that is present but not a number, a truncated
  line, a missing GPU index or undecodable text raises :class:`TelemetryParseError`, never a
  bare ``KeyError``.
- Units are converted to the sample's (W, J, %, bytes, MHz, °C). AMD's ``MB`` are MiB:
  amd-smi divides bytes by ``1024*1024`` (``amdsmi_cli/amdsmi_commands.py``), and an MI300X
  (192 GiB HBM3) reports ``TOTAL_VRAM: 196048 MB``, 191.5 GiB; AMD's ``KB`` are taken as KiB.
- A GPU that several series describe (MIG instances in dcgm-exporter, partitions in the AMD
  exporter, XCD clock domains in amd-smi) is folded into one sample per physical GPU: device
  gauges from the first series, the energy counter from the largest (the freshest read), and
  per-instance memory (MIG) left ``None`` because no instance's figure is the device's.
- ``timestamp_s`` comes from the output where the tool prints one (nvidia-smi's ``timestamp``
  field, amd-smi's watch-mode ``timestamp``), else from the caller's ``timestamp`` (when the
  recorder read the output); neither is an error.
"""

from pocforge.telemetry.parsers.amd import (
    parse_amd_metrics_exporter,
    parse_amd_smi_metric_json,
    parse_rocm_smi_json,
)
from pocforge.telemetry.parsers.nvidia import (
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_QUERY_FIELDS,
    nvidia_smi_rows,
    parse_dcgm_exporter,
    parse_nvidia_smi_csv,
)
from pocforge.telemetry.parsers.sample import GIB, KIB, MIB, GpuSample, Source, TelemetryParseError

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "NVIDIA_SMI_ARGS",
    "NVIDIA_SMI_QUERY_FIELDS",
    "GpuSample",
    "Source",
    "TelemetryParseError",
    "nvidia_smi_rows",
    "parse_amd_metrics_exporter",
    "parse_amd_smi_metric_json",
    "parse_dcgm_exporter",
    "parse_nvidia_smi_csv",
    "parse_rocm_smi_json",
]
