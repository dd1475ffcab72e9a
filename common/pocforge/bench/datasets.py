"""Workloads: the prompts and output lengths of a run, deterministic from a seed.

- ``random``: prompts of an exact token count (fixed or drawn from a distribution): random
  whole-word tokens (which cannot merge across their spaces), re-tokenised and trimmed or
  extended until the count is exact.
- ``sharegpt``: ShareGPT-format JSON (``[{"conversations": [{"from": "human", "value":
  ...}, {"from": "gpt", ...}]}]``); the first human turn is the prompt, the reply's token
  count the output length (unless ``osl`` fixes it). Filtered as vLLM does.
- ``shared_prefix``: ``groups`` distinct prefixes of ``prefix_len`` tokens, each request
  one prefix plus a random suffix of ``isl`` tokens (prefix caching workloads).
- ``multi_turn``: ``users`` conversations of ``turns`` turns (LMCache's multi-round QA):
  turn ``t`` of a user is the shared system prompt, that user's earlier questions and
  answers, and a new question, as one prompt text; sent turn-major (every user's turn 0,
  then every turn 1, ...). Each request carries its ``turn``: 0 is the cache miss.
- ``doc_qa``: ``documents`` long documents asked ``questions`` rounds of questions (round
  ``q``: each document plus its ``q``-th question); the round is the request's ``turn``.
- ``trace``: Mooncake-style JSONL (``timestamp`` ms, ``input_length``, ``output_length``,
  optional ``hash_ids``: equal ids give equal 512-token blocks, hence shared prefixes);
  replayed at its timestamps.

Length specs: ``512`` (fixed), ``uniform:LO:HI``, ``normal:MEAN:STD`` (rounded, >= 1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from pocforge.bench.tokenizer import Tokenizer
from pocforge.spec.serving_schema import Lengths

DatasetKind = Literal["random", "sharegpt", "shared_prefix", "trace", "multi_turn", "doc_qa"]
# Kinds whose requests are a fixed set built from the dataset (not ``n`` drawn prompts).
FIXED_SETS = ("trace", "multi_turn", "doc_qa")


class DatasetError(ValueError):
    """A dataset argument or file that cannot be used."""


def _length(value: object) -> object:
    """The command line's text form (``512``, ``uniform:LO:HI``, ...) as :class:`Lengths`."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return parse_length(value, "length")
    return value


# The spec's own length type: a sweep built from a spec carries it as it is.
LengthSpec = Annotated[Lengths, BeforeValidator(_length)]


class DatasetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: DatasetKind = "random"
    isl: LengthSpec = Field(
        Lengths(mean=512), description="Input lengths (tokens); suffix length for shared_prefix."
    )
    osl: LengthSpec | None = Field(
        Lengths(mean=128), description="Output lengths; None: from the dataset."
    )
    path: str | None = Field(None, description="ShareGPT JSON or trace JSONL file.")
    groups: int = Field(4, ge=1, description="shared_prefix: number of distinct prefixes.")
    prefix_len: int = Field(256, ge=1, description="shared_prefix: prefix length in tokens.")
    block_size: int = Field(512, ge=1, description="trace: tokens per hash_id block.")
    users: int = Field(4, ge=1, description="multi_turn: conversations; doc_qa: documents.")
    turns: int = Field(2, ge=1, description="multi_turn: turns; doc_qa: question rounds.")
    system_prompt_len: int = Field(
        0, ge=0, description="multi_turn: shared system prompt tokens; doc_qa: document tokens."
    )
    answer_len: LengthSpec | None = Field(
        None, description="multi_turn: tokens of each earlier answer in the history."
    )
    seed: int = 0


@dataclass(slots=True)
class RequestSpec:
    """One request to send: prompt text, its token count, output tokens to ask for."""

    prompt: str
    prompt_tokens: int
    max_tokens: int
    at_s: float | None = None  # trace replay: send offset in seconds
    turn: int | None = None  # multi_turn / doc_qa: the turn or round (0: nothing cached yet)


def parse_length(spec: str | int, what: str) -> Lengths:
    """The command line's length text: ``N``, ``uniform:LO:HI`` or ``normal:MEAN:STD[:MIN:MAX]``
    (a normal draw clipped to [MIN, MAX], default [1, inf)) as the spec's :class:`Lengths`."""
    parts = str(spec).split(":")
    usage = f"{what} {spec!r}: use N, uniform:LO:HI or normal:MEAN:STD[:MIN:MAX] (tokens, N >= 1)"
    try:
        if len(parts) == 1:
            n = int(parts[0])
            if n < 1:
                raise ValueError
            return Lengths(mean=n)
        kind, numbers = parts[0], tuple(float(x) for x in parts[1:])
    except ValueError:
        raise DatasetError(usage) from None
    if kind == "uniform" and len(numbers) == 2 and 1 <= numbers[0] <= numbers[1]:
        low, high = int(numbers[0]), int(numbers[1])
        return Lengths(distribution="uniform", mean=(low + high) // 2, min=low, max=high)
    if kind == "normal" and len(numbers) in (2, 4) and numbers[0] >= 1 and numbers[1] >= 0:
        low, high = numbers[2:] if len(numbers) == 4 else (1.0, math.inf)
        if 1 <= low <= high:
            mean = round(numbers[0])
            if numbers[1] == 0:
                return Lengths(mean=int(min(max(mean, low), high)))
            clipped = len(numbers) == 4
            return Lengths(
                distribution="normal",
                mean=mean,
                std=numbers[1],
                min=int(low) if clipped else None,
                max=int(high) if clipped and not math.isinf(high) else None,
            )
    raise DatasetError(usage)


def format_length(lengths: Lengths) -> str:
    """The command-line text of ``lengths`` (what :func:`parse_length` reads back)."""
    if lengths.distribution == "fixed":
        return str(lengths.mean)
    if lengths.distribution == "uniform":
        return f"uniform:{lengths.min}:{lengths.max}"
    text = f"normal:{lengths.mean}:{lengths.std:g}"
    if lengths.min is not None or lengths.max is not None:
        text += f":{lengths.min or 1}:{lengths.max or 10**9}"
    return text


def draw_lengths(lengths: Lengths, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` token counts drawn from ``lengths`` (a normal draw is rounded and clipped)."""
    if lengths.distribution == "fixed":
        return [lengths.mean] * n
    if lengths.distribution == "uniform":
        return [int(x) for x in rng.integers(lengths.min, lengths.max + 1, n)]
    low = lengths.min or 1
    high = lengths.max if lengths.max is not None else math.inf
    return [int(min(max(round(x), low), high)) for x in rng.normal(lengths.mean, lengths.std, n)]


def exact_prompt(
    tok: Tokenizer, ids: np.ndarray, target: int, pool: np.ndarray, rng: np.random.Generator
) -> tuple[str, int]:
    """Text whose re-tokenisation has exactly ``target`` tokens, starting from ``ids``.

    Decoding random ids and encoding again merges or splits tokens; trim or extend and try
    again (a few rounds suffice). Returns the text and its true count (equal to target
    unless the tokenizer cannot hit it, which the count then says).
    """
    cur = list(ids[:target])
    best: tuple[str, int] = ("", 0)
    for _ in range(12):
        text = tok.decode(cur)
        enc = tok.encode(text)
        if len(enc) == target:
            return text, target
        if abs(len(enc) - target) < abs(best[1] - target) or not best[0]:
            best = (text, len(enc))
        if len(enc) > target:
            cur = enc[:target]
        else:
            cur = enc + [int(x) for x in rng.choice(pool, target - len(enc))]
    return best


def _random_prompts(
    tok: Tokenizer, lengths: list[int], rng: np.random.Generator
) -> list[tuple[str, int]]:
    pool = np.asarray(tok.word_ids())
    return [exact_prompt(tok, rng.choice(pool, n), n, pool, rng) for n in lengths]


def _need_tokenizer(tok: Tokenizer | None, kind: str) -> Tokenizer:
    if tok is None:
        raise DatasetError(
            f"dataset {kind!r} needs the model's tokenizer for exact token counts: pass --tokenizer PATH"
        )
    return tok


def build_requests(cfg: DatasetConfig, n: int, tok: Tokenizer | None) -> list[RequestSpec]:
    """``n`` requests of the workload (trace: the trace's requests, at most ``n`` if n > 0)."""
    rng = np.random.default_rng(cfg.seed)
    if cfg.kind == "random":
        tok = _need_tokenizer(tok, cfg.kind)
        isl = draw_lengths(cfg.isl, n, rng)
        osl = draw_lengths(cfg.osl or Lengths(mean=128), n, rng)
        return [
            RequestSpec(t, c, o)
            for (t, c), o in zip(_random_prompts(tok, isl, rng), osl, strict=True)
        ]
    if cfg.kind == "shared_prefix":
        tok = _need_tokenizer(tok, cfg.kind)
        prefixes = _random_prompts(tok, [cfg.prefix_len] * cfg.groups, rng)
        suffixes = _random_prompts(tok, draw_lengths(cfg.isl, n, rng), rng)
        osl = draw_lengths(cfg.osl or Lengths(mean=128), n, rng)
        order = rng.permutation(n)
        out = []
        for i in order:
            text = prefixes[i % cfg.groups][0] + "\n" + suffixes[i][0]
            out.append(RequestSpec(text, tok.count(text), osl[i]))
        return out
    if cfg.kind == "sharegpt":
        return _sharegpt(cfg, n, _need_tokenizer(tok, cfg.kind), rng)
    if cfg.kind == "multi_turn":
        return _multi_turn(cfg, _need_tokenizer(tok, cfg.kind), rng)
    if cfg.kind == "doc_qa":
        return _doc_qa(cfg, _need_tokenizer(tok, cfg.kind), rng)
    return _trace(cfg, n, _need_tokenizer(tok, cfg.kind), rng)


def _multi_turn(cfg: DatasetConfig, tok: Tokenizer, rng: np.random.Generator) -> list[RequestSpec]:
    """Turn-major requests of ``cfg.users`` growing conversations (see the module notes).
    The history is plain text (``User: ...`` / ``Assistant: ...`` lines), so turn ``t``'s
    prompt begins with turn ``t - 1``'s, token for token up to its last line."""
    users, turns = cfg.users, cfg.turns
    system = (
        _random_prompts(tok, [cfg.system_prompt_len], rng)[0][0] if cfg.system_prompt_len else ""
    )
    questions = _random_prompts(tok, draw_lengths(cfg.isl, users * turns, rng), rng)
    answers = _random_prompts(
        tok, draw_lengths(cfg.answer_len or Lengths(mean=64), users * turns, rng), rng
    )
    osl = draw_lengths(cfg.osl or Lengths(mean=128), users * turns, rng)
    history = [system + "\n" if system else "" for _ in range(users)]
    out = []
    for turn in range(turns):
        for user in range(users):
            k = turn * users + user
            text = f"{history[user]}User: {questions[k][0]}\nAssistant:"
            out.append(RequestSpec(text, tok.count(text), osl[k], turn=turn))
            history[user] = f"{text} {answers[k][0]}\n"
    return out


def _doc_qa(cfg: DatasetConfig, tok: Tokenizer, rng: np.random.Generator) -> list[RequestSpec]:
    """Round-major questions on ``cfg.users`` documents of ``cfg.system_prompt_len`` tokens."""
    docs = _random_prompts(tok, [cfg.system_prompt_len] * cfg.users, rng)
    count = cfg.users * cfg.turns
    questions = _random_prompts(tok, draw_lengths(cfg.isl, count, rng), rng)
    osl = draw_lengths(cfg.osl or Lengths(mean=128), count, rng)
    out = []
    for round_ in range(cfg.turns):
        for d, (doc, _) in enumerate(docs):
            k = round_ * cfg.users + d
            text = f"{doc}\n\nQuestion: {questions[k][0]}\nAnswer:"
            out.append(RequestSpec(text, tok.count(text), osl[k], turn=round_))
    return out


def _read_path(cfg: DatasetConfig) -> Path:
    if not cfg.path:
        raise DatasetError(f"dataset {cfg.kind!r} needs --dataset-path FILE")
    p = Path(cfg.path)
    if not p.is_file():
        raise DatasetError(f"dataset file not found: {p}")
    return p


def _sharegpt(
    cfg: DatasetConfig, n: int, tok: Tokenizer, rng: np.random.Generator
) -> list[RequestSpec]:
    p = _read_path(cfg)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{p}: not a JSON file ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{p}: expected a JSON list of conversations")
    pairs = []
    for item in data:
        conv = (
            item.get("conversations") or item.get("conversation")
            if isinstance(item, dict)
            else None
        )
        if not isinstance(conv, list) or len(conv) < 2:
            continue
        first, second = conv[0], conv[1]
        text = first.get("value") or first.get("content")
        reply = second.get("value") or second.get("content")
        if isinstance(text, str) and isinstance(reply, str):
            pairs.append((text, reply))
    if not pairs:
        raise DatasetError(f"{p}: no conversation with a prompt and a reply")
    fixed_osl = draw_lengths(cfg.osl, 1, rng)[0] if cfg.osl else None
    out: list[RequestSpec] = []
    for i in rng.permutation(len(pairs)):
        text, reply = pairs[i]
        p_len = tok.count(text)
        o_len = fixed_osl or tok.count(reply)
        # vLLM's filter: drop very short and over-long pairs.
        if p_len < 4 or o_len < 4 or p_len > 1024 or p_len + o_len > 2048:
            continue
        out.append(RequestSpec(text, p_len, o_len))
        if len(out) == n:
            break
    if not out:
        raise DatasetError(f"{p}: every conversation was filtered out (prompt 4..1024 tokens)")
    while len(out) < n:  # fewer usable conversations than requests: cycle, same order
        out.append(out[len(out) % len(out)])
    return out


def _trace(
    cfg: DatasetConfig, n: int, tok: Tokenizer, rng: np.random.Generator
) -> list[RequestSpec]:
    p = _read_path(cfg)
    rows = []
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append(
                (
                    float(row["timestamp"]),
                    int(row["input_length"]),
                    int(row["output_length"]),
                    list(row.get("hash_ids") or []),
                )
            )
        except (ValueError, KeyError, TypeError):
            raise DatasetError(
                f"{p}:{lineno}: need timestamp (ms), input_length, output_length[, hash_ids]"
            ) from None
    if not rows:
        raise DatasetError(f"{p}: empty trace")
    rows.sort(key=lambda r: r[0])
    if n > 0:
        rows = rows[:n]
    t0 = rows[0][0]
    pool = np.asarray(tok.word_ids())
    blocks: dict[int, np.ndarray] = {}
    out = []
    for ts, isl, osl, hashes in rows:
        ids = []
        for h in hashes:
            if h not in blocks:
                blocks[h] = np.random.default_rng([cfg.seed, int(h)]).choice(pool, cfg.block_size)
            ids.extend(blocks[h])
        if len(ids) < isl:
            ids.extend(rng.choice(pool, isl - len(ids)))
        text, count = exact_prompt(tok, np.asarray(ids[:isl]), max(1, isl), pool, rng)
        out.append(RequestSpec(text, count, max(1, osl), at_s=(ts - t0) / 1000.0))
    return out
