"""``pocforge bench``: the benchmark verbs. ``serve`` is the serving acceptance sweep.

The group is module-level so other modules add verbs to it (``bench kernels``,
``bench train``): ``from pocforge.cli.bench import bench`` then ``@bench.command(...)``.
Commands of this group report bad arguments as one line and exit 2.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class OneLineError(click.UsageError):
    """A usage or setup error shown as one line (no usage block, no traceback); exit 2."""

    def show(self, file=None) -> None:  # noqa: ANN001 - click's signature
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class OneLineCommand(click.Command):
    """A command whose argument errors print one line and exit 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except OneLineError:
            raise
        except click.UsageError as exc:
            raise OneLineError(f"{ctx.command_path}: {exc.format_message()}", ctx) from None


class OneLineGroup(click.Group):
    command_class = OneLineCommand


class _NumberList(click.ParamType):
    name = "LIST"

    def __init__(self, integer: bool):
        self.integer = integer

    def convert(self, value, param, ctx):  # noqa: ANN001
        if isinstance(value, list):
            return value
        out = []
        for part in str(value).split(","):
            part = part.strip()
            try:
                x = float(part)
                if self.integer and (math.isinf(x) or x != int(x)):
                    raise ValueError
            except ValueError:
                kind = "integers" if self.integer else "numbers"
                self.fail(f"{value!r} is not a comma-separated list of {kind}", param, ctx)
            if not x > 0:
                self.fail(f"{part} must be > 0", param, ctx)
            out.append(x)
        return out


@click.group(cls=OneLineGroup)
def bench() -> None:
    """Benchmarks: serving sweeps (and kernels, training)."""


@bench.command("serve")
@click.option("--base-url", required=True, help="Server root, e.g. http://127.0.0.1:8000")
@click.option("--model", required=True, help="Model name as the server serves it.")
@click.option(
    "--tokenizer", type=click.Path(exists=True), help="Local tokenizer folder or tokenizer.json."
)
@click.option(
    "--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True
)
@click.option(
    "--dataset",
    type=click.Choice(["random", "sharegpt", "shared-prefix", "trace"]),
    default="random",
    show_default=True,
)
@click.option("--dataset-path", type=click.Path(), help="ShareGPT JSON or trace JSONL.")
@click.option(
    "--isl",
    default="512",
    show_default=True,
    help="Input tokens: N, uniform:LO:HI or normal:MEAN:STD.",
)
@click.option(
    "--osl", default=None, help="Output tokens (same forms); default 128 (sharegpt: from the data)."
)
@click.option(
    "--prefix-len", type=int, default=256, show_default=True, help="shared_prefix: prefix tokens."
)
@click.option(
    "--groups", type=int, default=4, show_default=True, help="shared_prefix: distinct prefixes."
)
@click.option("--concurrency", type=_NumberList(True), help="Closed-loop points, e.g. 1,4,16.")
@click.option(
    "--rate",
    type=_NumberList(False),
    help="Open-loop points in req/s, e.g. 2,4,8 (inf: all at once).",
)
@click.option("--trace-speed", type=_NumberList(False), help="Trace replay speed-ups (default 1).")
@click.option(
    "--burstiness", type=float, default=1.0, show_default=True, help="Gamma shape (1 = Poisson)."
)
@click.option("--max-concurrency", type=int, help="Open loop: cap on requests in flight.")
@click.option(
    "--num-prompts", type=int, default=100, show_default=True, help="Requests per repeat."
)
@click.option("--duration", type=float, help="Seconds per repeat instead of a request count.")
@click.option("--repeats", type=int, default=1, show_default=True)
@click.option(
    "--warmup",
    type=int,
    default=0,
    show_default=True,
    help="Unrecorded requests before each repeat.",
)
@click.option(
    "--slo", "slos", multiple=True, help="metric:statistic:threshold, e.g. ttft_ms:p99:2000."
)
@click.option(
    "--gpus", type=int, default=1, show_default=True, help="GPUs serving (for per-GPU throughput)."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--ignore-eos/--no-ignore-eos", default=True, show_default=True)
@click.option(
    "--timeout", type=float, default=600.0, show_default=True, help="Per-request timeout (s)."
)
@click.option(
    "--scrape/--no-scrape", default=True, show_default=True, help="Scrape the server's /metrics."
)
@click.option(
    "--transport",
    type=click.Choice(["auto", "raw", "aiohttp"]),
    default="auto",
    show_default=True,
    help="Streaming client: raw (lean asyncio HTTP/1.1, http:// only), aiohttp, or auto (raw for http://).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
def serve(**kw) -> None:
    """Serving sweep against an OpenAI-compatible server; writes OUT/summary.json."""
    from pydantic import ValidationError

    from pocforge.bench.config import BenchError, SweepConfig
    from pocforge.bench.datasets import DatasetConfig, DatasetError, parse_length
    from pocforge.bench.tokenizer import TokenizerError
    from pocforge.bench.verdicts import SLOError, parse_slo

    modes = [m for m in ("concurrency", "rate", "trace_speed") if kw[m]]
    if kw["dataset"] == "trace":
        if kw["concurrency"] or kw["rate"]:
            raise OneLineError(
                "--dataset trace replays its own timestamps; use --trace-speed, not --concurrency/--rate"
            )
        mode, values = "trace", kw["trace_speed"] or [1.0]
    elif len(modes) != 1 or kw["trace_speed"]:
        raise OneLineError("give exactly one of --concurrency LIST or --rate LIST")
    else:
        mode, values = modes[0], kw[modes[0]]
    for name in ("num_prompts", "repeats", "gpus", "prefix_len", "groups"):
        if kw[name] is not None and kw[name] < 1:
            raise OneLineError(f"--{name.replace('_', '-')} must be >= 1")
    if kw["warmup"] < 0:
        raise OneLineError("--warmup must be >= 0")
    tokenizer = kw["tokenizer"]
    if tokenizer is None and Path(kw["model"]).is_dir():
        tokenizer = kw["model"]
    try:
        parse_length(kw["isl"], "--isl")
        if kw["osl"]:
            parse_length(kw["osl"], "--osl")
        for s in kw["slos"]:
            parse_slo(s)
        osl = kw["osl"] or (None if kw["dataset"] == "sharegpt" else "128")
        cfg = SweepConfig(
            base_url=kw["base_url"],
            model=kw["model"],
            api=kw["api"],
            tokenizer=tokenizer,
            dataset=DatasetConfig(
                kind=kw["dataset"],
                isl=kw["isl"],
                osl=osl,
                path=kw["dataset_path"],
                groups=kw["groups"],
                prefix_len=kw["prefix_len"],
                seed=kw["seed"],
            ),
            mode=mode,
            values=values,
            num_prompts=kw["num_prompts"],
            duration_s=kw["duration"],
            repeats=kw["repeats"],
            warmup=kw["warmup"],
            burstiness=kw["burstiness"],
            max_concurrency=kw["max_concurrency"],
            slos=list(kw["slos"]),
            ignore_eos=kw["ignore_eos"],
            gpus=kw["gpus"],
            timeout_s=kw["timeout"],
            scrape_metrics=kw["scrape"],
            seed=kw["seed"],
            transport=kw["transport"],
        )
    except (DatasetError, SLOError) as exc:
        raise OneLineError(str(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise OneLineError(f"{where}: {err['msg']}") from None
    _run(cfg, Path(kw["out"]), quiet=kw["quiet"], errors=(BenchError, DatasetError, TokenizerError))


def _run(cfg, out: Path, quiet: bool, errors: tuple[type[Exception], ...]) -> None:  # noqa: ANN001
    from rich.console import Console

    from pocforge.bench.console import RichProgress, summary_table
    from pocforge.bench.repeat import Progress
    from pocforge.bench.sweep import run_sweep

    progress = Progress() if quiet else RichProgress()
    try:
        summary = run_sweep(cfg, out, progress=progress)
    except errors as exc:
        raise OneLineError(str(exc)) from None
    finally:
        if isinstance(progress, RichProgress):
            progress.close()
    # Piped output gets a wide table rather than rich's 80-column default.
    Console(width=None if sys.stdout.isatty() else 200).print(summary_table(summary))
    click.echo(f"summary: {out / 'summary.json'}")
    if summary.status == "interrupted":
        click.echo("interrupted: finished points and requests are kept", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if any(p.status == "failed" for p in summary.points):
        sys.exit(1)


def register(main: click.Group) -> None:
    main.add_command(bench)
