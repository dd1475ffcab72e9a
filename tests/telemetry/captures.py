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


def stand_in(folder: Path, name: str, body: str, python: str) -> Path:
    """A vendor tool on a bin folder, run by ``python``: the instrument the recorder reads
    (no GPU here). ``body`` is the script after its imports (sys, time) and its arguments
    parsed into ``args``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(f"#!{python}\nimport sys, time\nargs = sys.argv[1:]\n{body}")
    script.chmod(0o755)
    return folder


def replaying(lines: list[str]) -> str:
    """A looping tool's body: ``lines`` at once, then the first of them every 0.1 s."""
    return (
        f"lines = {lines!r}\n"
        "sys.stdout.write(''.join(lines)); sys.stdout.flush()\n"
        "while True:\n"
        "    time.sleep(0.1); sys.stdout.write(lines[0]); sys.stdout.flush()\n"
    )


def nvidia_smi_live(gpus: int, power_w: float) -> str:
    """``nvidia-smi … -lms N``'s body: every N ms one row per GPU at ``power_w``, stamped
    with the time it prints (UTC, to the millisecond, as the capture's rows are)."""
    return (
        "period = int(args[args.index('-lms') + 1]) / 1000\n"
        "while True:\n"
        "    now = time.time()\n"
        "    stamp = time.strftime('%Y/%m/%d %H:%M:%S', time.gmtime(now))\n"
        "    stamp += f'.{int(now % 1 * 1000):03d}'\n"
        f"    for gpu in range({gpus}):\n"
        f"        print(f'{{stamp}}, {{gpu}}, {power_w}, 50, 10, 1000, 81559, 1980, 2619, "
        "40, 45, 0x0000000000000000', flush=True)\n"
        "    time.sleep(period)\n"
    )
