"""Print the kernel benchmark and compile-check result documents as rich tables."""

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
]


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def _peers_cell(row: dict, timed: bool) -> str:
    """``vLLM 1.23`` per peer when timed (the kernel's speed-up over it), else whether it agrees."""
    cells = []
    for name, peer in row.get("peers", {}).items():
        if "error" in peer:
            cells.append(f"{name}: [yellow]n/a[/]")
        elif not peer["agrees"]:
            cells.append(f"{name}: [red]disagrees[/] ({peer['rel_error']:.1e})")
        elif timed and "speedup" in peer:
            cells.append(f"{name} {peer['speedup']:.2f}")
        else:
            cells.append(f"{name} [green]agrees[/]")
    return "\n".join(cells) or "-"


def print_report(result: dict, console: Console | None = None) -> None:
    console = console or Console()
    meta = result["metadata"]
    timed = result["timed"]
    columns = COLUMNS if timed else COLUMNS[:4]
    table = Table(title=f"pocforge kernels on {meta['device']} ({meta['arch']}, {meta['dtype']})")
    for _, header, _ in columns:
        table.add_column(header)
    table.add_column("x peer" if timed else "peers")
    table.add_column("ok")
    for row in result["rows"]:
        ok = "[green]yes[/]" if row.get("correct") else f"[red]no[/] {row.get('error', '')}"
        cells = [_cell(row, key, fmt) for key, _, fmt in columns]
        table.add_row(*cells, _peers_cell(row, timed), ok)
    console.print(table)
    if result["note"]:
        console.print(f"[bold yellow]{result['note']}[/]")
    if timed:
        console.print(
            "x torch / x peer: the peer's median time over the kernel's (above 1: ours is faster)."
        )


STATUS_STYLE = {"ok": "green", "spills": "yellow"}
SEVERITY = ["ok", "spills", "over shared limit", "compile error"]


def _kib(value) -> str:
    return "-" if value is None else f"{value / 1024:.1f}"


def compile_summary(result: dict, every_variant: bool = False) -> list[dict]:
    """Rows of the compile report: one per architecture and kernel (or per variant)."""
    records = result["records"]
    if every_variant:
        groups = [[r] for r in records]
    else:
        keyed: dict[tuple, list] = {}
        for r in records:
            keyed.setdefault((r["arch"], r["kernel"]), []).append(r)
        groups = list(keyed.values())
    rows = []
    for group in groups:
        first = group[0]

        def most(key, pick=max, rows=group):
            values = [r[key] for r in rows if r[key] is not None]
            return pick(values) if values else None

        rows.append(
            {
                "arch": first["arch"],
                "kernel": first["kernel"].removesuffix("_kernel"),
                "where": f"{first['case']} / {first['config']}"
                if every_variant
                else str(len(group)),
                "warps": ",".join(map(str, sorted({r["num_warps"] for r in group}))),
                "shared": f"{_kib(most('shared_bytes'))} / {_kib(first['shared_limit'])}",
                "regs": str(most("registers") or "-"),
                "spill": str(most("spill_bytes") or 0),
                "occupancy": str(most("occupancy", min) or "-"),
                "status": max((r["status"] for r in group), key=SEVERITY.index),
            }
        )
    return rows


SUMMARY_HEADERS = {
    "arch": "arch",
    "kernel": "kernel",
    "where": "variants",
    "warps": "warps",
    "shared": "shared KiB / limit",
    "regs": "regs",
    "spill": "spill B",
    "occupancy": "occupancy",
    "status": "status",
}


def compile_markdown(result: dict) -> str:
    """The per-kernel summary as a Markdown table, for kernels/BENCHMARKS.md."""
    lines = [
        "| " + " | ".join(SUMMARY_HEADERS.values()) + " |",
        "|" + "---|" * len(SUMMARY_HEADERS),
    ]
    for row in compile_summary(result):
        lines.append("| " + " | ".join(row[key] for key in SUMMARY_HEADERS) + " |")
    return "\n".join(lines) + "\n"


def print_compile_report(
    result: dict, console: Console | None = None, every_variant: bool = False
) -> None:
    """One row per architecture and kernel (or per compiled variant), then every failure."""
    # Wide enough for the table in logs and CI output, where rich would assume 80 columns.
    console = console or Console(width=max(Console().width, 140))
    records = result["records"]
    title = (
        f"pocforge kernels compiled ahead of time (Triton {result['triton']}, "
        f"{result['dtype']}; no GPU involved, no timing)"
    )
    table = Table(title=title)
    headers = dict(SUMMARY_HEADERS, where="case / config" if every_variant else "variants")
    for key, header in headers.items():
        numeric = key in ("warps", "shared", "regs", "spill", "occupancy")
        table.add_column(header, justify="right" if numeric else "left")
    for row in compile_summary(result, every_variant):
        style = STATUS_STYLE.get(row["status"], "red")
        cells = [row[key] for key in headers]
        cells[-1] = f"[{style}]{row['status']}[/]"
        table.add_row(*cells)
    console.print(table)
    console.print(
        "shared, regs and spill are the largest over a kernel's variants, occupancy the "
        "smallest (waves per SIMD, as the AMD compiler reports it)."
    )
    for r in records:
        if r["status"] != "ok":
            detail = r["error"] or (
                f"{r['shared_bytes']} B shared of {r['shared_limit']}"
                if r["status"] == "over shared limit"
                else f"{r['spill_bytes']} B spilled per thread"
            )
            style = STATUS_STYLE.get(r["status"], "red")
            console.print(
                f"[{style}]{r['status']}[/] {r['arch']} {r['kernel']} "
                f"({r['case']}; {r['config']}): {detail}"
            )
    for error in result["errors"]:
        console.print(f"[red]launcher failed[/] {error}")
    for name in result["not_compiled"]:
        console.print(f"[red]never compiled[/] {name}: no case launches it")
    verdict = "[green]all compiled and fit[/]" if result["ok"] else "[red]FAILED[/]"
    console.print(f"{len(records)} variants for {', '.join(result['targets'])}: {verdict}")
