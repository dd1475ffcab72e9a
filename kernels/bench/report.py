"""Print a benchmark result document as a rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

COLUMNS = [  # (row key, header, format)
    ("op", "op", "{}"),
    ("model", "model", "{}"),
    ("shape", "shape", "{}"),
    ("rel_error", "rel err", "{:.1e}"),
    ("median_ms", "ms", "{:.4f}"),
    ("gbps", "GB/s", "{:.0f}"),
    ("tflops", "TFLOP/s", "{:.1f}"),
    ("roofline_pct", "% roofline", "{:.0f}"),
    ("bound", "bound", "{}"),
    ("vs_torch", "x torch", "{:.2f}"),
    ("vs_vllm", "x vLLM", "{:.2f}"),
]


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def print_report(result: dict, console: Console | None = None) -> None:
    console = console or Console()
    meta = result["metadata"]
    columns = COLUMNS if result["timed"] else COLUMNS[:4]
    table = Table(title=f"pocforge kernels on {meta['device']} ({meta['arch']}, {meta['dtype']})")
    for _, header, _ in columns:
        table.add_column(header)
    table.add_column("ok")
    for row in result["rows"]:
        ok = "[green]yes[/]" if row.get("correct") else f"[red]no[/] {row.get('error', '')}"
        table.add_row(*(_cell(row, key, fmt) for key, _, fmt in columns), ok)
    console.print(table)
    if result["note"]:
        console.print(f"[bold yellow]{result['note']}[/]")
