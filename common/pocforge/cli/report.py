"""``pocforge report RUN [--compare RUN …] [--pdf] [--out FILE]``."""

from __future__ import annotations

from pathlib import Path

import click

from pocforge.cli.common import fail


@click.command("report")
@click.argument("run")
@click.option("--compare", "compare", multiple=True, help="Baseline run(s) to compare against.")
@click.option(
    "--out", type=click.Path(dir_okay=False), help="HTML file (default: <run>/dashboard.html)."
)
@click.option("--pdf", is_flag=True, help="Also print a PDF next to it (headless Chromium).")
@click.option(
    "--lang",
    "langs",
    multiple=True,
    type=click.Choice(["en", "zh-CN"]),
    help="Language(s) to render (repeatable; default: the spec's poc.language). Another "
    "language than the spec's goes to dashboard.<lang>.html.",
)
@click.option(
    "--price-per-gpu-hour",
    type=click.FloatRange(min=0, min_open=True),
    help="Our GPU price, for per-dollar comparisons with competitors.",
)
@click.option(
    "--power-w-per-gpu",
    type=click.FloatRange(min=0, min_open=True),
    help="Our GPU power, for per-watt comparisons with competitors.",
)
@click.option(
    "--root", type=click.Path(file_okay=False), help="Results folder (default: results/)."
)
def report_cmd(
    run: str,
    compare: tuple[str, ...],
    out: str | None,
    pdf: bool,
    langs: tuple[str, ...],
    price_per_gpu_hour: float | None,
    power_w_per_gpu: float | None,
    root: str | None,
) -> None:
    """Write the customer dashboard of RUN (<poc> = its newest run, <poc>/<run-id>, or a folder)."""
    from pocforge.report import render
    from pocforge.report.pdf import PdfError, print_pdf
    from pocforge.results.base import SchemaError
    from pocforge.results.compare import Cost
    from pocforge.results.store import RunError, RunStore

    store = RunStore(root)
    try:
        path = store.resolve(run)
        baselines = [store.resolve(c) for c in compare]
        if out and len(langs) > 1:
            fail("--out names one file: give one --lang with it")
        cost = Cost(price_per_gpu_hour=price_per_gpu_hour, power_w_per_gpu=power_w_per_gpu)
        pages = [
            render(path, out, baselines, cost, lang=lang, rendering=list(langs))
            for lang in (langs or [None])
        ]
    except (RunError, SchemaError) as exc:
        fail(str(exc))
    for html in pages:
        click.echo(f"dashboard: {html}")
    if pdf:
        for html in pages:
            try:
                click.echo(f"pdf: {print_pdf(html, Path(html).with_suffix('.pdf'))}")
            except PdfError as exc:
                fail(str(exc), code=1)


def register(main: click.Group) -> None:
    main.add_command(report_cmd)
