"""``pocforge model``: local model utilities. ``make-tiny`` builds a servable tiny model."""

from __future__ import annotations

import click

from pocforge.cli.bench import OneLineError, OneLineGroup


@click.group(cls=OneLineGroup)
def model() -> None:
    """Model folders the kit builds for tests and demos."""


@model.command("make-tiny")
@click.option(
    "--arch", type=click.Choice(["llama", "qwen-moe"]), default="llama", show_default=True
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--layers", type=int, default=2, show_default=True)
def make_tiny_cmd(arch: str, out: str, seed: int, layers: int) -> None:
    """Random-initialised tiny model + locally trained tokenizer; vLLM serves it; no hub access."""
    from pocforge.tiny_model.make import TinyModelError, make_tiny

    if layers < 1:
        raise OneLineError("--layers must be >= 1")
    try:
        path = make_tiny(out, arch=arch, seed=seed, layers=layers)
    except (TinyModelError, OSError) as exc:
        raise OneLineError(str(exc)) from None
    click.echo(f"tiny {arch} model written to {path}")


def register(main: click.Group) -> None:
    main.add_command(model)
