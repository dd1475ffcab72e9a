"""Rotary embedding kernel (NeoX and GPT-J, partial rotary, GQA) against its float64 reference."""

import pytest
import torch

from pocforge_kernels.rotary_embedding import op, ref
from pocforge_kernels.testing import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (tokens, query heads, key heads, head size, rotary dims)
SHAPES = [(7, 4, 2, 64, 64), (13, 3, 1, 40, 24), (2, 33, 33, 16, 16)]


def _case(tokens, hq, hk, head, rot, dtype):
    positions = torch.randint(0, 100, (tokens,))
    query = torch.randn(tokens, hq * head, dtype=dtype)
    key = torch.randn(tokens, hk * head, dtype=dtype)
    cache = ref.build_cos_sin_cache(128, rot, dtype=dtype)
    return positions, query, key, cache


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(shape, dtype, is_neox):
    """query and key are rotated in place as the float64 reference does, the tail untouched."""
    tokens, hq, hk, head, rot = shape
    positions, query, key, cache = _case(*shape, dtype)
    want_q, want_k = query.double(), key.double()
    ref.rotary_embedding(positions, want_q, want_k, head, cache.double(), is_neox)
    op.rotary_embedding(positions, query, key, head, cache, is_neox)
    assert_close(query, want_q, dtype, "query")
    assert_close(key, want_k, dtype, "key")


def test_query_only_and_strided_query():
    """key=None rotates only the query; a query sliced from a fused qkv tensor keeps its stride."""
    tokens, heads, head = 5, 2, 32
    qkv = torch.randn(tokens, 3 * heads * head)
    query = qkv[:, : heads * head]
    before_kv = qkv[:, heads * head :].clone()
    positions = torch.arange(tokens)
    cache = ref.build_cos_sin_cache(16, head)
    want = query.double().contiguous()
    ref.rotary_embedding(positions, want, None, head, cache.double(), True)
    op.rotary_embedding(positions, query, None, head, cache, True)
    assert_close(query, want, torch.float32)
    assert torch.equal(qkv[:, heads * head :], before_kv)


def test_rotation_by_negative_angle_is_the_inverse():
    """Rotating with sin negated undoes the rotation (the HF integration's backward uses it)."""
    positions, query, key, cache = _case(6, 2, 2, 32, 32, torch.float32)
    original = query.clone()
    op.rotary_embedding(positions, query, key, 32, cache, True)
    cos, sin = cache.chunk(2, dim=-1)
    op.rotary_embedding(positions, query, key, 32, torch.cat([cos, -sin], -1), True)
    assert_close(query, original, torch.float32)


def test_opcheck():
    """Schema (in-place mutation of query and key), fake tensor and AOT dispatch."""
    positions, query, key, cache = _case(3, 2, 1, 16, 16, torch.float32)
    torch.library.opcheck(
        torch.ops.pocforge.rotary_embedding.default, (positions, query, key, 16, cache, True)
    )
    torch.library.opcheck(
        torch.ops.pocforge.rotary_embedding.default, (positions, query, None, 16, cache, False)
    )
