"""``pocforge plan POC``: ranked layouts for a POC's cluster. The subcommands that need no
POC file, ``plan predict`` and ``plan disagg``, are in :mod:`pocforge.cli.plan_predict`."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pocforge.cli.common import fail

console = Console()
if not console.is_terminal:
    console = Console(width=200)


class _PlanGroup(click.Group):
    """``plan POC`` is ``plan poc POC``: a first argument that is no subcommand is a POC."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["poc", *args]
        return super().parse_args(ctx, args)


@click.group("plan", cls=_PlanGroup)
def plan_group() -> None:
    """Plan the layout: memory fit, predicted performance, ranked layouts.

    \b
    pocforge plan POC [--gpus N] [--top K] [--json FILE]
    pocforge plan predict --model llama-3.1-70b --gpu MI300X --tp 8 --isl 1024 --osl 1024 ...
    """


@plan_group.command("poc")
@click.argument("poc")
@click.option(
    "--gpus", type=click.IntRange(min=1), help="Plan for this many GPUs (default: the cluster's)."
)
@click.option(
    "--top", type=click.IntRange(min=1), default=5, show_default=True, help="Layouts to show."
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the plan here.",
)
def plan_poc_cmd(poc: str, gpus: int | None, top: int, json_file: Path | None) -> None:
    """Rank every layout of POC's cluster by throughput per GPU at its SLOs."""
    from pocforge.runner.plan import PlanError, plan_document
    from pocforge.spec import SpecError, load_poc

    try:
        spec = load_poc(poc)
        doc = plan_document(spec, gpus, top)
    except (SpecError, PlanError) as exc:
        fail(str(exc))
    _print_plan(doc)
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(doc, indent=2) + "\n")
        console.print(f"plan: {json_file}")


def _print_plan(doc: dict) -> None:
    console.print(
        f"[bold]{doc['model']}[/] ({_count(doc['params'])} parameters, "
        f"{_count(doc['active_params'])} active) on {doc['gpus']} × {doc['gpu']}"
    )
    serving = doc.get("serving")
    if serving:
        mem = serving["memory"]
        pools = mem if "weights_gb" not in mem else {"": mem}  # disaggregated: per pool
        for role, one in pools.items():
            console.print(
                f"serving ({serving['framework']}, {serving['precision']}, the spec's layout "
                f"{serving['layout']}){f' {role} instance' if role else ''}: weights "
                f"{one['weights_gb']} GB, KV cache {one['kv_cache_gb']} GB per GPU = "
                f"{one['kv_tokens']} tokens"
            )
        for w in serving["workloads"]:
            own = Table(
                "concurrency",
                "fits",
                "TTFT ms",
                "TPOT ms",
                "out tok/s/GPU",
                box=None,
                title=f"{w['name']}: the spec's layout, predicted",
            )
            for p in w["points"]:
                own.add_row(
                    str(p["concurrency"]),
                    "yes" if p["fits"] else "[red]no[/]",
                    f"{p['ttft_ms']:.1f}",
                    f"{p['tpot_ms']:.2f}",
                    f"{p['output_tput_per_gpu']:.1f}",
                )
            console.print(own)
            ranked = Table(
                "layout",
                "replicas",
                "concurrency",
                "headroom",
                "TTFT ms",
                "TPOT ms",
                "out tok/s/GPU",
                box=None,
                title=f"{w['name']}: ISL {w['isl']} OSL {w['osl']}, layouts ranked",
            )
            for c in w["ranked"]:
                p = c["prediction"]
                free = p["memory"]["kv_cache_gb"] / max(p["memory"]["capacity_gb"], 1e-9)
                ranked.add_row(
                    c["layout"],
                    str(c["replicas"]),
                    str(c["concurrency"]),
                    f"{free:.0%}",
                    f"{p['ttft_ms']:.1f}",
                    f"{p['tpot_ms']:.2f}",
                    f"{c['score']:.1f}",
                )
            console.print(ranked)
            for c in w["rejected"][:8]:
                console.print(f"  [dim]rejected {c['layout']}: {c['rejected']}[/]")
            if len(w["rejected"]) > 8:
                console.print(
                    f"  [dim]… {len(w['rejected']) - 8} more rejected (--json for all)[/]"
                )
            if w["launch"]:
                console.print(f"launch of the best layout: [cyan]{w['launch'][-1]}[/]")
    training = doc.get("training")
    if training:
        p = training["prediction"]
        console.print(
            f"training ({training['framework']}, {training['precision']}, seq {training['seq_len']}, "
            f"global batch {training['global_batch']}), the spec's layout {p['layout']}: "
            f"{p['tokens_per_s_per_gpu']:.1f} tokens/s/GPU, {p['tflops_per_gpu']:.2f} TFLOP/s/GPU, "
            f"MFU {p['mfu']:.1%}" + ("" if p["fits"] else f" — [red]does not fit[/]: {p['why']}")
        )
        ranked = Table(
            "layout",
            "tokens/s/GPU",
            "TFLOP/s/GPU",
            "MFU",
            "states GB",
            "activations GB",
            box=None,
            title="training layouts ranked",
        )
        for c in training["ranked"]:
            q = c["prediction"]
            ranked.add_row(
                c["layout"],
                f"{q['tokens_per_s_per_gpu']:.1f}",
                f"{q['tflops_per_gpu']:.1f}",
                f"{q['mfu']:.1%}",
                str(q["memory"]["model_states_gb"]),
                str(q["memory"]["activations_gb"]),
            )
        console.print(ranked)
        for check in training.get("criteria", []):
            verdict = "meets" if check["meets"] else "[red]misses[/]"
            console.print(
                f"{check['criterion']}: predicted {check['predicted']:.4g} with the spec's "
                f"layout — {verdict} it"
            )
        if training.get("launch"):
            console.print(f"launch of the best layout: [cyan]{training['launch'][-1]}[/]")


def _count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(int(n))


def register(main: click.Group) -> None:
    from pocforge.cli.plan_predict import disagg_cmd, predict_cmd

    plan_group.add_command(predict_cmd)
    plan_group.add_command(disagg_cmd)
    main.add_command(plan_group)
