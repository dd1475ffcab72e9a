"""Terminal front end of a sweep: a rich progress bar while it runs, a table at the end."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pocforge.bench.records import RequestRecord
from pocforge.bench.repeat import Progress as ProgressHooks
from pocforge.bench.summary import Aggregate, PointSummary, Summary


class RichProgress(ProgressHooks):
    """One bar per repeat of a point, on stderr; refreshed 4 times a second from rich's thread."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=self.console,
            refresh_per_second=4,
            transient=False,
        )
        self._task = None

    def start(self, point: str, repeat: int, total: int | None) -> None:
        if self._task is None:
            self._bar.start()
        self._task = self._bar.add_task(f"{point} repeat {repeat}", total=total, failed=0)
        self._failed = 0

    def advance(self, record: RequestRecord) -> None:
        if not record.success:
            self._failed += 1
        self._bar.update(self._task, advance=1, failed=self._failed)

    def end(self) -> None:
        pass

    def close(self) -> None:
        if self._task is not None:
            self._bar.stop()


def _fmt(agg: dict[str, Aggregate] | None, stat: str, digits: int = 1) -> str:
    if not agg or stat not in agg:
        return "-"
    a = agg[stat]
    if a.ci95_low is None or a.ci95_high is None:
        return f"{a.mean:.{digits}f}"
    return f"{a.mean:.{digits}f}±{(a.ci95_high - a.ci95_low) / 2:.{digits}f}"


def _verdicts(p: PointSummary) -> str:
    if not p.verdicts:
        return "-"
    style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
    return " ".join(
        f"[{style[v.verdict]}]{v.metric}:{v.statistic} {v.verdict}[/]" for v in p.verdicts
    )


def summary_table(summary: Summary) -> Table:
    repeats = summary.config.get("repeats", 1)
    title = f"serving sweep: {summary.config.get('model')} ({summary.status}"
    title += f", mean±95% CI over {repeats} repeats)" if repeats > 1 else ")"
    t = Table(title=title)
    for col in (
        "point",
        "status",
        "ok/failed",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p99",
        "E2EL p50",
        "goodput",
        "verdicts",
        "client",
    ):
        t.add_column(
            col, justify="left" if col in ("point", "status", "verdicts", "client") else "right"
        )
    for p in summary.points:
        a = p.aggregate
        ok = sum(r.completed for r in p.repeats)
        bad = sum(r.failed for r in p.repeats)
        status = {"ok": "[green]ok[/]", "failed": "[red]failed[/]"}.get(
            p.status, f"[yellow]{p.status}[/]"
        )
        t.add_row(
            p.id,
            status,
            f"{ok}/{bad}",
            _fmt(a.get("request_throughput"), "value", 2),
            _fmt(a.get("output_throughput"), "value"),
            _fmt(a.get("ttft_ms"), "p50"),
            _fmt(a.get("ttft_ms"), "p99"),
            _fmt(a.get("tpot_ms"), "p50", 2),
            _fmt(a.get("itl_ms"), "p99", 2),
            _fmt(a.get("e2el_ms"), "p50"),
            _fmt(a.get("goodput"), "value", 2),
            _verdicts(p),
            "[red]client-limited[/]" if p.client_limited else "ok",
        )
    t.caption = "ms unless stated; definitions in summary.json"
    return t
