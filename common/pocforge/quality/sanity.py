"""The sanity gate: a handful of fixed prompts before any sweep. Each answer must be
non-empty, as long as asked (``ignore_eos``), its token count equal to what the server
reports, and not a loop of one token (the share of distinct tokens at least
``min_distinct``): the marks of corrupt weights or a broken kernel, which throughput runs
miss. A failure stops the serving stage before any timing is spent.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from pocforge.quality.completions import Completion, complete
from pocforge.spec.gates import SanityGate

SCHEMA_VERSION = 1


class SanityAnswer(BaseModel):
    prompt: str
    text: str
    tokens: int
    distinct: float = Field(description="Distinct tokens / tokens.")
    problems: list[str] = Field(default_factory=list)


class SanityResult(BaseModel):
    kind: str = "pocforge-sanity"
    schema_version: int = SCHEMA_VERSION
    passed: bool
    max_tokens: int
    min_distinct: float
    answers: list[SanityAnswer]

    @property
    def problems(self) -> list[str]:
        return [f"{a.prompt!r}: {p}" for a in self.answers for p in a.problems]


def judge(answer: Completion, gate: SanityGate) -> SanityAnswer:
    problems = []
    count = len(answer.tokens)
    if not answer.text.strip():
        problems.append("empty output")
    if count != gate.max_tokens:
        problems.append(f"{count} tokens generated, {gate.max_tokens} asked")
    if answer.completion_tokens is not None and answer.completion_tokens != count:
        problems.append(
            f"usage says {answer.completion_tokens} completion tokens, the answer has {count}"
        )
    distinct = len(set(answer.tokens)) / count if count else 0.0
    if count and distinct < gate.min_distinct:
        top = max(set(answer.tokens), key=answer.tokens.count)
        problems.append(
            f"repeats itself: {distinct:.0%} distinct tokens (< {gate.min_distinct:.0%}), "
            f"{answer.tokens.count(top)} × {top!r}"
        )
    return SanityAnswer(
        prompt=answer.prompt, text=answer.text, tokens=count, distinct=distinct, problems=problems
    )


def run_sanity(base_url: str, model: str, gate: SanityGate) -> SanityResult:
    """Ask every prompt once (greedy); raises ``CompletionError`` when the server fails."""
    answers = [
        judge(complete(base_url, model, prompt, gate.max_tokens), gate) for prompt in gate.prompts
    ]
    return SanityResult(
        passed=not any(a.problems for a in answers),
        max_tokens=gate.max_tokens,
        min_distinct=gate.min_distinct,
        answers=answers,
    )
