"""Scrape the server's Prometheus ``/metrics`` around a sweep point.

Before and after each point the kit reads every ``vllm:`` / ``sglang:`` sample (summed over
label sets; histogram buckets dropped, their ``_sum``/``_count`` kept) and stores both and
their difference; while the point runs it polls the gauges (KV-cache usage, running and
waiting requests) once a second, because right after a point they are back to zero and only
the peak says how loaded the server was. From the difference it derives the figures both
servers report under their own names (:data:`DERIVED`: requests, tokens, prefix-cache hit
rate, the server's own mean TTFT...), so a vLLM and an SGLang point read the same way.
Parsing is prometheus_client's.

The names are those of vLLM 0.32 and SGLang 0.5.23 (SGLang needs ``--enable-metrics``), as
captured from real servers in ``tests/data/metrics/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import NamedTuple

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

PREFIXES = ("vllm:", "sglang:", "pocforge_router:")
# Labels a sample keeps beside its total: the cache tier of vLLM's prompt tokens
# (``source``) and, behind the kit's P/D router, the pool an instance serves
# (``pocforge_pool``); a sample is also counted under ``name{label="value",...}``.
KEPT_LABELS = ("pocforge_pool", "source")
EXTERNAL = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}'
DECODE_PROMPT = 'vllm:prompt_tokens_by_source_total{pocforge_pool="decode"}'
# Gauges whose peak during a point matters; names differ across servers and versions.
PEAK_GAUGES = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "sglang:token_usage",  # fraction of the KV-cache pool in use
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
)


class Derived(NamedTuple):
    """A figure of one run from the change of the server's samples: ``numerator`` (divided
    by ``denominator`` if there is one) of the first source the server reports. A source
    counts as reported when its denominator (else its numerator) is among the samples; a
    missing numerator is then 0 (SGLang exports a labelled counter only once it moved)."""

    definition: str
    sources: tuple[tuple[str, str | None], ...]


def _means(*histograms: str) -> tuple[tuple[str, str], ...]:
    """Sources of a histogram's mean: its ``_sum`` over its ``_count``, one per server."""
    return tuple((f"{h}_sum", f"{h}_count") for h in histograms)


DERIVED = {
    "requests": Derived(
        "Requests the server finished.",
        (("vllm:request_success_total", None), ("sglang:num_requests_total", None)),
    ),
    "prompt_tokens": Derived(
        "Prompt tokens the server processed.",
        (("vllm:prompt_tokens_total", None), ("sglang:prompt_tokens_total", None)),
    ),
    "generation_tokens": Derived(
        "Tokens the server generated.",
        (("vllm:generation_tokens_total", None), ("sglang:generation_tokens_total", None)),
    ),
    "prefix_cache_hit_rate": Derived(
        "Prompt tokens found in the prefix cache / prompt tokens looked up.",
        (
            ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
            ("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
        ),
    ),
    "external_prefix_cache_hit_rate": Derived(
        "Prompt tokens found in an external KV cache (a KV connector: the prefill pool's "
        "transfer, an offload tier) / prompt tokens looked up there.",
        (("vllm:external_prefix_cache_hits_total", "vllm:external_prefix_cache_queries_total"),),
    ),
    "kv_transfer_tokens": Derived(
        "Prompt tokens whose KV the server took from another instance (vLLM's "
        "prompt_tokens_by_source, source external_kv_transfer).",
        ((EXTERNAL, None),),
    ),
    "kv_transfer_share": Derived(
        "Prompt tokens the decode pool took from transferred KV / prompt tokens it admitted "
        "(all sources); behind the kit's P/D router only.",
        ((EXTERNAL, DECODE_PROMPT),),
    ),
    "kv_transfer_failures": Derived(
        "Requests whose prefill or decode answer failed at the kit's P/D router.",
        (("pocforge_router:transfer_failures_total", None),),
    ),
    "nixl_bytes_per_transfer": Derived(
        "Bytes of KV one NIXL transfer moved, on average (vLLM's NixlConnector histogram "
        "nixl_bytes_transferred: sum / count; one transfer per request).",
        _means("vllm:nixl_bytes_transferred"),
    ),
    "nixl_failed_transfers": Derived(
        "KV transfers NIXL reported as failed (vLLM's NixlConnector).",
        (("vllm:nixl_num_failed_transfers_total", None),),
    ),
    "router_prefill_mean_s": Derived(
        "Mean time of a request's prefill step as the kit's P/D router saw it (the first "
        "part of TTFT; the rest is the KV transfer and decode's first token).",
        _means("pocforge_router:prefill_seconds"),
    ),
    "router_decode_first_byte_mean_s": Derived(
        "Mean time from the router's decode request to decode's first byte back (KV "
        "transfer + first decode step).",
        _means("pocforge_router:decode_first_byte_seconds"),
    ),
    "preemptions": Derived(
        "Requests preempted (vLLM) or retracted (SGLang) to free KV cache; SGLang reports "
        "none until its first retraction.",
        (("vllm:num_preemptions_total", None), ("sglang:num_retracted_requests_total", None)),
    ),
    "ttft_mean_s": Derived(
        "Mean time to first token as the server measured it (histogram sum / count).",
        _means("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    ),
    "tpot_mean_s": Derived(
        "Mean per-request time per output token as the server measured it.",
        _means(
            "vllm:request_time_per_output_token_seconds",
            "sglang:request_time_per_output_token_seconds",
        ),
    ),
    "e2el_mean_s": Derived(
        "Mean end-to-end request latency as the server measured it.",
        _means("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    ),
    "queue_time_mean_s": Derived(
        "Mean time a request waited in the server's queue before it was scheduled.",
        _means("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    ),
}


# Serving metrics (pocforge.metrics) read from the derived figures: name -> (figure, scale).
SERVER_METRICS = {
    "prefix_hit_rate": ("prefix_cache_hit_rate", 1.0),
    "kv_transfer_share": ("kv_transfer_share", 1.0),
    "kv_transfer_failures": ("kv_transfer_failures", 1.0),
    "prefill_ms": ("router_prefill_mean_s", 1000.0),
    "transfer_decode_ms": ("router_decode_first_byte_mean_s", 1000.0),
    "kv_transfer_mb_per_request": ("nixl_bytes_per_transfer", 1e-6),
}


def server_metrics(server: ServerMetrics | None) -> dict[str, float]:
    """The repeat's serving metrics that come from the servers' counters (those reported)."""
    if server is None or not server.scraped:
        return {}
    out = {
        name: server.derived[figure] * scale
        for name, (figure, scale) in SERVER_METRICS.items()
        if figure in server.derived
    }
    # vLLM with prefix caching off looks nothing up (queries stay 0): none of the prompt
    # came from the cache, which is a hit rate of 0, not a missing one
    looked_up = server.delta.get("vllm:prefix_cache_queries_total")
    if "prefix_hit_rate" not in out and looked_up == 0 and server.derived.get("prompt_tokens"):
        out["prefix_hit_rate"] = 0.0
    return out


def derive(delta: dict[str, float]) -> dict[str, float]:
    """:data:`DERIVED` figures of one run from its samples' change; a figure the server does
    not report, or a ratio over zero, is left out."""
    out: dict[str, float] = {}
    for name, figure in DERIVED.items():
        for numerator, denominator in figure.sources:
            if denominator is None:
                if numerator in delta:
                    out[name] = delta[numerator]
                    break
            elif denominator in delta:
                if delta[denominator]:
                    out[name] = delta.get(numerator, 0.0) / delta[denominator]
                break
    return out


class ServerMetrics(BaseModel):
    """What the server's own metrics said about one run of a point."""

    model_config = ConfigDict(extra="forbid")

    scraped: bool
    error: str | None = None
    url: str
    before: dict[str, float] = Field(default_factory=dict)
    after: dict[str, float] = Field(default_factory=dict)
    delta: dict[str, float] = Field(
        default_factory=dict, description="after - before, every sample."
    )
    peak: dict[str, float] = Field(
        default_factory=dict, description="Max of polled gauges during the run."
    )
    polls: int = 0
    derived: dict[str, float] = Field(
        default_factory=dict,
        description="From `delta`, one name whichever the server: "
        + "; ".join(f"{name}: {figure.definition}" for name, figure in DERIVED.items()),
    )
    engines: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per engine (vLLM's `engine` label: one per data-parallel rank), the change "
        "of its request and token counters during the run: how the load spread over the ranks.",
    )


# Counters worth keeping per data-parallel engine (vLLM labels every sample with `engine`;
# SGLang 0.5.23 counts requests and tokens in its one tokenizer process, without a rank).
ENGINE_COUNTERS = (
    "vllm:request_success_total",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
)


def parse_engines(text: str) -> dict[str, dict[str, float]]:
    """Engine label -> {counter: value summed over its other labels} for ENGINE_COUNTERS."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            engine = s.labels.get("engine")
            if engine is None or s.name not in ENGINE_COUNTERS:
                continue
            per = out.setdefault(engine, {})
            per[s.name] = per.get(s.name, 0.0) + float(s.value)
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets, for the server prefixes.

    Samples that are not finite are left out: SGLang's CPU engine reports
    ``sglang:fwd_occupancy`` as NaN (nothing measured), which would poison a sum and which
    JSON, hence ``summary.json``, cannot carry.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.startswith(PREFIXES) or s.name.endswith(("_bucket", "_created")):
                continue
            if not math.isfinite(s.value):
                continue
            for key in _keys(s.name, s.labels):
                out[key] = out.get(key, 0.0) + float(s.value)
    return out


def _keys(name: str, labels: dict[str, str]) -> list[str]:
    """``name``, and ``name{label="value"}`` for each kept label it has and for all of them."""
    kept = [(k, labels[k]) for k in KEPT_LABELS if k in labels]
    keys = [name] + [f'{name}{{{k}="{v}"}}' for k, v in kept]
    if len(kept) > 1:
        keys.append(name + "{" + ",".join(f'{k}="{v}"' for k, v in kept) + "}")
    return keys


async def scrape_text(session: aiohttp.ClientSession, url: str, timeout_s: float = 5.0) -> str:
    # identity: SGLang's /metrics (prometheus_client's ASGI app) gzips for a client that
    # accepts it, and the benchmark's session does not decompress (client.make_session).
    headers = {"Accept-Encoding": "identity"}
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with session.get(url, headers=headers, timeout=timeout) as resp:
        resp.raise_for_status()
        return await resp.text()


async def scrape(
    session: aiohttp.ClientSession, url: str, timeout_s: float = 5.0
) -> dict[str, float]:
    return parse_metrics(await scrape_text(session, url, timeout_s))


class Scraper:
    """``await start()`` before a point, ``await stop()`` after; never raises."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, poll_s: float = 1.0):
        self.session = session
        self.result = ServerMetrics(scraped=False, url=base_url.rstrip("/") + "/metrics")
        self.poll_s = poll_s
        self._task: asyncio.Task | None = None

    async def _try(self) -> dict[str, float] | None:
        try:
            return await scrape(self.session, self.result.url)
        except Exception as exc:  # noqa: BLE001 - a scrape failure is recorded, not raised
            self.result.error = f"{type(exc).__name__}: {exc}"
            return None

    async def _engines(self) -> dict[str, dict[str, float]]:
        try:
            return parse_engines(await scrape_text(self.session, self.result.url))
        except Exception:  # noqa: BLE001 - the per-engine view is extra; the totals stand alone
            return {}

    async def start(self) -> None:
        before = await self._try()
        if before is not None:
            self.result.before = before
            self._engines_before = await self._engines()
            self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            snap = await self._try()
            if snap is None:
                continue
            self.result.polls += 1
            for g in PEAK_GAUGES:
                if g in snap:
                    self.result.peak[g] = max(self.result.peak.get(g, snap[g]), snap[g])

    async def stop(self) -> ServerMetrics:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.result.before:
            return self.result
        after = await self._try()
        if after is not None:
            self.result.after = after
            self.result.delta = {k: after[k] - self.result.before.get(k, 0.0) for k in after}
            self.result.derived = derive(self.result.delta)
            self.result.scraped = True
            self.result.error = None
            start = getattr(self, "_engines_before", {})
            self.result.engines = {
                engine: {k: v - start.get(engine, {}).get(k, 0.0) for k, v in counters.items()}
                for engine, counters in (await self._engines()).items()
            }
        return self.result
