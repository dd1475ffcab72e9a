"""``summary.json`` of a serving sweep: a versioned pydantic schema with a JSON-schema export.

The summary is self-describing: the definitions of every metric it reports (from
:mod:`pocforge.metrics`, derived ones labelled), the configuration, versions and host, and
for each point and repeat the statistics, client health and the server's own metrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pocforge import atomic
from pocforge.bench.promscrape import ServerMetrics
from pocforge.bench.verdicts import Verdict

SCHEMA_VERSION = "1.0"

Stats = dict[str, float | None]


class MetricDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    unit: str
    definition: str
    derived: bool
    better: Literal["lower", "higher"]


class ClientHealth(BaseModel):
    """How the client itself fared; ``limited`` marks a point the client, not the server, capped."""

    model_config = ConfigDict(extra="forbid")

    limited: bool
    reasons: list[str] = Field(default_factory=list)
    loop_lag_ms: Stats = Field(description="Lateness of a 25 ms event-loop probe timer.")
    send_delay_ms: Stats = Field(
        description="Client lag: actual - scheduled send time per request."
    )
    cpu_s: float = Field(description="Client process CPU time during the run.")
    cpu_utilisation: float = Field(description="cpu_s / wall time (1.0 = one core busy).")
    cpu_ms_per_chunk: float | None = Field(None, description="Client CPU per streamed chunk.")


class RepeatResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repeat: int
    status: Literal["ok", "failed", "interrupted"]
    error: str | None = None
    started_at: str
    duration_s: float = Field(description="Benchmark duration: first send to last completion.")
    started_unix_s: float | None = Field(
        None,
        description="Unix time the measured phase began (the first send): with duration_s, "
        "the window telemetry is integrated over.",
    )
    requests_sent: int
    completed: int
    failed: int
    offered_rate: float | None = Field(
        description="Request rate asked for (req/s); None in closed loop."
    )
    achieved_rate: float | None = Field(description="Requests sent / send span (req/s).")
    peak_concurrency: int
    metrics: dict[str, Stats | float | None]
    client: ClientHealth
    server: ServerMetrics | None = None


class Aggregate(BaseModel):
    """Mean across repeats with a two-sided 95% Student-t interval (None with one repeat)."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    ci95_low: float | None
    ci95_high: float | None
    n: int
    values: list[float]


class PointSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="c<N> (closed loop), r<rate> (open loop) or t<speed> (trace).")
    mode: Literal["concurrency", "rate", "trace"]
    value: float
    status: Literal["ok", "failed", "interrupted"]
    error: str | None = None
    records_file: str
    repeats: list[RepeatResult]
    aggregate: dict[str, dict[str, Aggregate]] = Field(
        default_factory=dict,
        description="metric -> statistic ('value' for scalar metrics) -> across-repeat aggregate.",
    )
    verdicts: list[Verdict] = Field(default_factory=list)
    client_limited: bool = False
    telemetry_file: str | None = Field(
        None, description="The node's telemetry while the point ran (JSONL), if sampled."
    )
    notes: list[str] = Field(
        default_factory=list, description="What the sweep's caller says of the point."
    )


class Environment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pocforge_version: str
    git_sha: str | None
    git_dirty: bool | None
    hostname: str
    python: str
    platform: str
    cpu_count: int | None
    packages: dict[str, str | None]
    server_models: list[str] = Field(default_factory=list)
    transport: Literal["raw", "aiohttp"] | None = Field(
        None,
        description="The streaming transport the requests went through (config 'auto' resolved).",
    )


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: str = SCHEMA_VERSION
    kind: Literal["serving-sweep"] = "serving-sweep"
    status: Literal["running", "complete", "interrupted", "failed"]
    started_at: str
    finished_at: str | None = None
    config: dict[str, Any]
    definitions: dict[str, MetricDefinition]
    definition_notes: dict[str, str] = Field(default_factory=dict)
    environment: Environment
    points: list[PointSummary] = Field(default_factory=list)
    best_passing_point: str | None = Field(
        None, description="Highest-load point whose every SLO verdict is pass, if any."
    )
    stopped_because: str | None = Field(
        None, description="Why the sweep was stopped early by its caller (e.g. a node lost)."
    )


def summary_json_schema() -> dict[str, Any]:
    """The JSON schema of summary.json (what ``summary.schema.json`` holds)."""
    return Summary.model_json_schema()


def write_summary(summary: Summary, out_dir: Path) -> Path:
    """Write ``summary.json`` (rewritten as the sweep goes, so a reader never sees half of
    it) and, once, its ``summary.schema.json``."""
    out = Path(out_dir) / "summary.json"
    atomic.write_text(out, summary.model_dump_json(indent=2))
    schema = Path(out_dir) / "summary.schema.json"
    if not schema.exists():
        atomic.write_text(schema, json.dumps(summary_json_schema(), indent=2))
    return out
