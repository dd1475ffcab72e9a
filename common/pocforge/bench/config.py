"""What a serving sweep is asked to do: points, repeats, dataset, SLOs and client limits."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pocforge.bench.client import (
    Api,
    Transport,
)
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.verdicts import SLOSpec


class BenchError(RuntimeError):
    """A sweep that cannot start (bad configuration, unreachable server): one clear line."""


class SweepConfig(BaseModel):
    """Everything a serving sweep needs; ``values`` are concurrencies, rates or trace speeds."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    model: str
    api: Api = "completions"
    tokenizer: str | None = Field(None, description="Local tokenizer folder or tokenizer.json.")
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    values: list[float] = Field(min_length=1)
    num_prompts: int | None = Field(100, ge=1)
    duration_s: float | None = Field(None, gt=0)
    repeats: int = Field(1, ge=1)
    profile_requests: int | None = Field(
        None, ge=1, description="Requests in a profiled point's pass; default a whole repeat."
    )
    warmup: int = Field(0, ge=0)
    burstiness: float = Field(1.0, gt=0)
    max_concurrency: int | None = Field(None, ge=1)
    slos: list[SLOSpec] = Field(
        default_factory=list,
        description="Each judged per point (text form metric:statistic:threshold).",
    )
    ignore_eos: bool = True
    gpus: int = Field(1, ge=1)
    timeout_s: float = Field(600.0, gt=0)
    transport: Transport = Field(
        "auto",
        description="Streaming transport: 'raw' (lean asyncio protocol, http:// only), "
        "'aiohttp', or 'auto' (raw for http://, aiohttp for https://).",
    )
    scrape_metrics: bool = True
    extra_body: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    bootstrap_resamples: int = Field(1000, ge=100)
    # Client saturation guard thresholds.
    max_loop_lag_p99_ms: float = 10.0
    max_send_delay_p99_ms: float = 10.0
    max_cpu_utilisation: float = 0.9

    @field_validator("values")
    @classmethod
    def _check_values(cls, v: list[float]) -> list[float]:
        if any(not x > 0 for x in v):
            raise ValueError("every concurrency, rate or speed must be > 0")
        if len(set(v)) != len(v):
            raise ValueError("points must be distinct (use --repeats to run one again)")
        return v

    def profiled_pass(self) -> SweepConfig:
        """The configuration of a profiled point's pass: ``profile_requests`` requests, none
        of them a warm-up (the repeats warmed the server), or else a whole repeat."""
        if self.profile_requests is None:
            return self
        return self.model_copy(
            update={"num_prompts": self.profile_requests, "duration_s": None, "warmup": 0}
        )

    def point_id(self, value: float) -> str:
        prefix = {"concurrency": "c", "rate": "r", "trace": "t"}[self.mode]
        return f"{prefix}{int(value)}" if self.mode == "concurrency" else f"{prefix}{value:g}"
