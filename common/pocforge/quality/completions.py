"""Greedy completions with their tokens and top log-probabilities, from an OpenAI-compatible
server (vLLM, SGLang): what the sanity and parity gates compare.

A few sequential requests per gate, so the standard library's HTTP client is enough (the
benchmark's aiohttp client is built for thousands of concurrent streams).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from pydantic import BaseModel, Field


class CompletionError(RuntimeError):
    """The server did not answer a completion (an infrastructure failure, not a wrong answer)."""


class Completion(BaseModel):
    prompt: str
    text: str
    tokens: list[str] = Field(description="Generated tokens as the server names them.")
    token_logprobs: list[float | None] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] = Field(
        default_factory=list, description="Per position: token -> log-probability (top-k)."
    )
    completion_tokens: int | None = Field(None, description="usage.completion_tokens.")
    finish_reason: str | None = None


def complete(
    base_url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    top_logprobs: int = 1,
    ignore_eos: bool = True,
    timeout_s: float = 300,
) -> Completion:
    """One greedy completion; ``ignore_eos`` makes every answer ``max_tokens`` long (vLLM's
    and SGLang's sampling parameter)."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "logprobs": top_logprobs,
        "ignore_eos": ignore_eos,
    }
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            data = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise CompletionError(f"{base_url}: HTTP {exc.code} for a completion: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise CompletionError(f"{base_url}: no completion ({exc})") from None
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise CompletionError(
            f"{base_url}: a completion without choices: {str(data)[:200]}"
        ) from None
    logprobs = choice.get("logprobs") or {}
    return Completion(
        prompt=prompt,
        text=choice.get("text") or "",
        tokens=list(logprobs.get("tokens") or []),
        token_logprobs=list(logprobs.get("token_logprobs") or []),
        top_logprobs=[dict(entry or {}) for entry in logprobs.get("top_logprobs") or []],
        completion_tokens=(data.get("usage") or {}).get("completion_tokens"),
        finish_reason=choice.get("finish_reason"),
    )
