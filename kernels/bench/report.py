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


STATUS_STYLE = {"ok": "green", "spills": "yellow"}
SEVERITY = ["ok", "spills", "over shared limit", "compile error"]


def _kib(value) -> str:
    return "-" if value is None else f"{value / 1024:.1f}"


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
    for header in ("arch", "kernel", "variants" if not every_variant else "case / config"):
        table.add_column(header)
    for header in ("warps", "shared KiB / limit", "regs", "spill B", "occupancy", "status"):
        table.add_column(header, justify="right" if header != "status" else "left")
    if every_variant:
        groups = [[r] for r in records]
    else:
        keyed: dict[tuple, list] = {}
        for r in records:
            keyed.setdefault((r["arch"], r["kernel"]), []).append(r)
        groups = list(keyed.values())
    for group in groups:
        first = group[0]

        def most(key, pick=max, rows=group):
            values = [r[key] for r in rows if r[key] is not None]
            return pick(values) if values else None

        status = max((r["status"] for r in group), key=SEVERITY.index)
        style = STATUS_STYLE.get(status, "red")
        warps = sorted({r["num_warps"] for r in group})
        table.add_row(
            first["arch"],
            first["kernel"].removesuffix("_kernel"),
            f"{first['case']} / {first['config']}" if every_variant else str(len(group)),
            ",".join(map(str, warps)),
            f"{_kib(most('shared_bytes'))} / {_kib(first['shared_limit'])}",
            str(most("registers") or "-"),
            str(most("spill_bytes") or 0),
            str(most("occupancy", min) or "-"),
            f"[{style}]{status}[/]",
        )
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
