"""Workloads are exact in token counts and deterministic from the seed."""

import json

import numpy as np
import pytest

from pocforge.bench.datasets import (
    DatasetConfig,
    DatasetError,
    build_requests,
    format_length,
    parse_length,
)
from pocforge.bench.load import arrival_offsets
from pocforge.bench.tokenizer import Tokenizer
from pocforge.spec.serving_schema import Lengths
from pocforge.tiny_model.make import make_tiny


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer(make_tiny(tmp_path_factory.mktemp("tiny"), "llama"))


def test_random_prompts_have_exact_token_counts(tok):
    reqs = build_requests(DatasetConfig(isl="uniform:16:300", osl="normal:50:10", seed=3), 40, tok)
    assert all(len(tok.encode(r.prompt)) == r.prompt_tokens for r in reqs)
    assert all(16 <= r.prompt_tokens <= 300 for r in reqs)
    assert len({r.prompt_tokens for r in reqs}) > 10
    fixed = build_requests(DatasetConfig(isl="128", osl="7"), 10, tok)
    assert {r.prompt_tokens for r in fixed} == {128} and {r.max_tokens for r in fixed} == {7}
    assert all(len(tok.encode(r.prompt)) == 128 for r in fixed)


def test_same_seed_same_workload_other_seed_other(tok):
    a = build_requests(DatasetConfig(isl="64", seed=1), 5, tok)
    b = build_requests(DatasetConfig(isl="64", seed=1), 5, tok)
    c = build_requests(DatasetConfig(isl="64", seed=2), 5, tok)
    assert [r.prompt for r in a] == [r.prompt for r in b] != [r.prompt for r in c]


def test_shared_prefix_groups(tok):
    reqs = build_requests(
        DatasetConfig(kind="shared_prefix", groups=3, prefix_len=40, isl="10"), 12, tok
    )
    assert len({r.prompt[:30] for r in reqs}) == 3  # three distinct prefixes, each reused
    assert all(r.prompt_tokens == len(tok.encode(r.prompt)) for r in reqs)
    assert all(49 <= r.prompt_tokens <= 53 for r in reqs)  # 40 + newline + 10, give or take a merge


def test_sharegpt(tok, tmp_path):
    long = "the race is not to the swift " * 10
    data = [
        {"conversations": [{"from": "human", "value": long}, {"from": "gpt", "value": long * 2}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": long}]},
        {"id": "no conversation"},
    ]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps(data))
    reqs = build_requests(DatasetConfig(kind="sharegpt", path=str(f), osl=None), 3, tok)
    assert len(reqs) == 3 and {r.prompt for r in reqs} == {long}  # "hi" is too short: filtered
    assert reqs[0].max_tokens == len(tok.encode(long * 2))
    with pytest.raises(DatasetError, match="not found"):
        build_requests(DatasetConfig(kind="sharegpt", path=str(tmp_path / "nope.json")), 1, tok)


def test_trace_replay_offsets_lengths_and_shared_blocks(tok, tmp_path):
    rows = [
        {"timestamp": 1000, "input_length": 40, "output_length": 5, "hash_ids": [7]},
        {"timestamp": 1500, "input_length": 60, "output_length": 3, "hash_ids": [7, 8]},
        {"timestamp": 3000, "input_length": 30, "output_length": 2},
    ]
    f = tmp_path / "trace.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    reqs = build_requests(DatasetConfig(kind="trace", path=str(f), block_size=32), 0, tok)
    assert [r.at_s for r in reqs] == [0.0, 0.5, 2.0]
    assert [r.prompt_tokens for r in reqs] == [40, 60, 30] and [r.max_tokens for r in reqs] == [
        5,
        3,
        2,
    ]
    assert reqs[0].prompt[:40] == reqs[1].prompt[:40]  # block 7 shared
    f.write_text('{"timestamp": 1}\n')
    with pytest.raises(DatasetError, match=":1: need timestamp"):
        build_requests(DatasetConfig(kind="trace", path=str(f)), 0, tok)


def test_length_specs_and_missing_tokenizer():
    """The command line's length texts read as the spec's Lengths and print back the same."""
    assert parse_length("12", "--isl") == Lengths(mean=12)
    assert parse_length("uniform:3:9", "--isl") == Lengths(
        distribution="uniform", mean=6, min=3, max=9
    )
    normal = parse_length("normal:100:10:50:150", "--isl")
    assert (normal.distribution, normal.mean, normal.std, normal.min, normal.max) == (
        "normal",
        100,
        10.0,
        50,
        150,
    )
    for text in ("12", "uniform:3:9", "normal:100:10:50:150", "normal:100:10"):
        assert format_length(parse_length(text, "--isl")) == text
    for bad in ("0", "uniform:9:3", "gauss:1:2", "x"):
        with pytest.raises(DatasetError):
            parse_length(bad, "--isl")
    with pytest.raises(DatasetError, match="--tokenizer"):
        build_requests(DatasetConfig(), 1, None)


def test_arrivals_poisson_and_gamma():
    rng = np.random.default_rng(0)
    p = arrival_offsets(20000, 10.0, 1.0, rng)
    gaps = np.diff(p)
    assert p[0] == 0.0 and np.mean(gaps) == pytest.approx(0.1, rel=0.03)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, rel=0.05)  # exponential: CV 1
    bursty = np.diff(arrival_offsets(20000, 10.0, 0.25, rng))
    assert np.mean(bursty) == pytest.approx(0.1, rel=0.05)
    assert np.std(bursty) / np.mean(bursty) == pytest.approx(2.0, rel=0.1)  # CV = 1/sqrt(shape)
    d = arrival_offsets(0, 50.0, 1.0, rng, duration_s=4.0)
    assert d.max() < 4.0 and 150 < d.size < 250


def test_multi_turn_histories_grow_turn_major_and_each_extends_the_last(tok):
    """Turn t of a user starts with that user's turn t-1, token for token (so a prefix
    cache can serve it); every user's turn 0 comes before any turn 1."""
    cfg = DatasetConfig(
        kind="multi_turn", users=3, turns=3, system_prompt_len=40, isl=8, answer_len=12, osl=4
    )
    reqs = build_requests(cfg, 0, tok)
    assert [r.turn for r in reqs] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for user in range(3):
        prev, cur = reqs[user], reqs[3 + user]
        before, after = tok.encode(prev.prompt), tok.encode(cur.prompt)
        assert after[: len(before)] == before and len(after) > len(before)
    system = tok.encode(reqs[0].prompt)[:40]
    assert all(tok.encode(r.prompt)[:40] == system for r in reqs)  # one shared system prompt
    assert reqs[0].prompt != reqs[1].prompt  # but their own questions


def test_doc_qa_rounds_ask_new_questions_of_the_same_documents(tok):
    cfg = DatasetConfig(kind="doc_qa", users=2, turns=3, system_prompt_len=64, isl=8, osl=4)
    reqs = build_requests(cfg, 0, tok)
    assert [r.turn for r in reqs] == [0, 0, 1, 1, 2, 2]
    doc0 = tok.encode(reqs[0].prompt)[:64]
    assert tok.encode(reqs[2].prompt)[:64] == doc0 and tok.encode(reqs[1].prompt)[:64] != doc0
    assert reqs[0].prompt != reqs[2].prompt
