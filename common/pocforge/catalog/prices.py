"""GPU-hour prices by basis (``prices.yaml``): the catalog's defaults for per-dollar
comparisons, each basis with its source and the date it was read."""

from __future__ import annotations

import datetime as dt
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

PRICES = Path(__file__).with_name("prices.yaml")


class PriceBasis(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    source: str = Field(pattern=r"^https?://")
    quoted: str = Field(description="The source's words the prices were taken from.")
    seen: dt.date
    per_gpu_hour: dict[str, float]


@cache
def price_bases() -> dict[str, PriceBasis]:
    data = yaml.safe_load(PRICES.read_text())
    return {name: PriceBasis.model_validate(entry) for name, entry in data["bases"].items()}


def gpu_price(gpu: str | None, basis: str) -> float | None:
    """The basis's price for ``gpu`` (None when it lists none); ``KeyError`` naming the known
    bases for an unknown one."""
    bases = price_bases()
    if basis not in bases:
        raise KeyError(f"unknown price basis {basis!r} (known: {', '.join(bases)})")
    return bases[basis].per_gpu_hour.get(gpu) if gpu else None
