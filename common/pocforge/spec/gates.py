"""The serving deployment's correctness gates (``serving.sanity``, ``serving.accuracy``,
``serving.parity``): the fast configuration must still give the right answers.

- sanity: a few fixed prompts before any sweep; empty, single-token-loop or miscounted
  output stops the stage before timing is spent;
- accuracy: lm-evaluation-harness tasks against the POC's own server, after the sweeps, on
  the deployment the benchmark measured; criteria ``accuracy.<name>.<metric>``;
- parity: the same prompts served by the POC's configuration and by the framework's own
  kernels without the POC's patches; criteria ``parity.<metric>``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

NAME = r"^[a-z0-9][a-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class SanityGate(_Strict):
    enabled: bool = Field(True, description="Run the sanity gate before the sweeps.")
    prompts: list[str] = Field(
        default_factory=lambda: [
            "The capital of France is",
            "def fibonacci(n):",
            "Translate to German: Good morning.",
            "1, 2, 3, 4,",
            "Once upon a time",
        ],
        min_length=1,
        description="Fixed prompts (completions API, greedy).",
    )
    max_tokens: int = Field(16, ge=2, description="Tokens generated per prompt.")
    min_distinct: float = Field(
        0.2,
        gt=0,
        le=1,
        description="Least share of distinct tokens in a continuation; a lower share (one token repeated, the mark of corrupt weights or a broken kernel) fails the gate.",
    )


class AccuracyTask(_Strict):
    name: str = Field(pattern=NAME, description="Name in criteria: `accuracy.<name>.<metric>`.")
    task: str | None = Field(
        None,
        description="lm-evaluation-harness task name; default: `name`. `pocforge_arith` is the kit's own (generated arithmetic, exact answers, no download).",
    )
    include: str | None = Field(
        None,
        description="Folder (relative to the POC folder) with the task's YAML and its local data (`dataset_path`/`data_files`); nothing is downloaded at run time.",
    )
    api: Literal["completions", "chat"] = Field(
        "completions",
        description="lm-eval's `local-completions` or `local-chat-completions` against the server.",
    )
    num_fewshot: int = Field(0, ge=0, description="Few-shot examples per prompt.")
    limit: int | None = Field(None, ge=1, description="Samples to evaluate; default: all.")
    concurrency: int = Field(4, ge=1, description="Requests in flight.")
    timeout_s: float = Field(1800, gt=0, description="Seconds the task may take.")


class ParityGate(_Strict):
    prompts: int = Field(
        16,
        ge=1,
        le=64,
        description="Fixed prompts from the kit's parity set (completions, greedy).",
    )
    max_tokens: int = Field(16, ge=1, description="Tokens generated per prompt.")
    top_logprobs: int = Field(
        5, ge=1, le=20, description="Top-k log-probabilities compared per position."
    )
    bisect: bool = Field(
        True,
        description="When the POC's kit kernels together fail parity, serve halves of them (then single kernels) against the baseline to name the ones at fault (a few more server starts).",
    )
