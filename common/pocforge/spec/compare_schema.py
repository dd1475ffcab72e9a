"""The spec's `compare:` section: baselines, competitors' published results, prices.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import (
    Field,
)

from pocforge.spec.base import Strict


class PublishedSource(Strict):
    """Where a competitor's numbers were published: the dashboard labels them "published,
    not measured here" and names this source."""

    url: str = Field(pattern=r"^https?://", description="Address of the published result.")
    seen: dt.date = Field(description="When it was read (YYYY-MM-DD).")
    publisher: str = Field(
        min_length=1, description="Who published it, e.g. `MLCommons (NVIDIA submission)`."
    )


class Competitor(Strict):
    name: str = Field(
        min_length=1, description="Label in the dashboard, e.g. `H200 vLLM (customer run)`."
    )
    file: str = Field(min_length=1, description="Result file (relative to the POC folder).")
    format: Literal[
        "pocforge",
        "vllm",
        "sglang",
        "aiperf",
        "guidellm",
        "mad",
        "trtllm-bench",
        "mlperf",
        "published",
    ] = Field(
        description="Tool that produced the file; `published`: a small YAML file of numbers a vendor or benchmark site printed, with its source and date (`pocforge.results.importers.published`); `mlperf`: an MLPerf Inference LoadGen summary."
    )
    workload: str | None = Field(
        None,
        description="Our workload it is compared with; default: the workload of the same name, or every workload when the file has one result.",
    )
    published: PublishedSource | None = Field(
        None,
        description="For a result file taken from a publication (an MLPerf submission, a vendor's page): where and when; `format: published` files carry their own.",
    )
    gpu: str | None = Field(None, description="GPU type it ran on.")
    gpus: int | None = Field(None, ge=1, description="GPUs it used (for per-GPU comparisons).")
    price_per_gpu_hour: float | None = Field(
        None,
        gt=0,
        description="For per-dollar comparisons; default: the catalog's price for `gpu` on `compare.price_basis`.",
    )
    power_w_per_gpu: float | None = Field(None, gt=0, description="For per-watt comparisons.")


class CompareSpec(Strict):
    baselines: list[str] = Field(
        default_factory=list, description="Earlier runs (`<poc>/<run-id>`) to compare against."
    )
    competitors: list[Competitor] = Field(
        default_factory=list, description="Other results on the same workload."
    )
    price_basis: str = Field(
        "owning-hyperscaler-tco",
        description="Which GPU-hour price table of the catalog (`catalog/prices.yaml`) per-dollar comparisons use, for both sides: compare like with like.",
    )
    price_per_gpu_hour: float | None = Field(
        None,
        gt=0,
        description="Our GPU-hour price (the customer's own rate); default: the catalog's price for the cluster's GPU on `price_basis`.",
    )
