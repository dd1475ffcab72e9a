"""The real captures of the vendor tools (tests/data/telemetry/, sources in
tests/data/README.md) as the sampler's and the node recorder's tests feed them."""

from __future__ import annotations

from pathlib import Path

from pocforge.telemetry.parsers import NVIDIA_SMI_QUERY_FIELDS, nvidia_smi_rows

DATA = Path(__file__).resolve().parents[1] / "data" / "telemetry"


def read(name: str) -> str:
    return (DATA / name).read_text()


def h100_noheader_lines() -> list[str]:
    """The 4x H100 capture's rows re-printed in the sampler's noheader query order (its
    power.draw.average as power.draw; clocks_event_reasons.active was not queried there,
    so [N/A])."""
    rows = nvidia_smi_rows(read("nvidia_smi_csv_nounits_4xh100.csv"))
    column = {"power.draw": "power.draw.average"}
    return [
        ", ".join(row.get(column.get(f, f)) or "[N/A]" for f in NVIDIA_SMI_QUERY_FIELDS) + "\n"
        for row in rows
    ]
