"""Paged decode attention (block sizes 16/32, GQA, ragged contexts, split-K) against float64."""

import pytest
import torch

from pocforge_kernels.paged_attention_decode import op, ref
from pocforge_kernels.testing import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _inputs(context_lens, hq, hkv, head, block_size, dtype):
    """A cache with more blocks than needed and each sequence's blocks scattered in it."""
    blocks_per_seq = -(-max(context_lens) // block_size)
    num_blocks = len(context_lens) * blocks_per_seq + 3
    k_cache = torch.randn(num_blocks, block_size, hkv, head, dtype=dtype)
    v_cache = torch.randn(num_blocks, block_size, hkv, head, dtype=dtype)
    tables = torch.randperm(num_blocks)[: len(context_lens) * blocks_per_seq]
    tables = tables.view(len(context_lens), blocks_per_seq).to(torch.int32)
    q = torch.randn(len(context_lens), hq, head, dtype=dtype)
    return q, k_cache, v_cache, tables, torch.tensor(context_lens, dtype=torch.int32)


def _check(context_lens, hq, hkv, head, block_size, dtype, partition_size):
    q, kc, vc, tables, lens = _inputs(context_lens, hq, hkv, head, block_size, dtype)
    scale = head**-0.5
    out = op.paged_attention_decode(
        q, kc, vc, tables, lens, max(context_lens), scale, partition_size
    )
    want = ref.paged_attention_decode(q.double(), kc.double(), vc.double(), tables, lens, scale)
    assert_close(out, want, dtype)


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_partition(block_size, dtype):
    """Contexts within one partition: the main pass writes the output directly."""
    _check([1, 37, 70], 4, 2, 64, block_size, dtype, partition_size=None)


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("dtype", DTYPES)
def test_split_k_with_reduction(block_size, dtype):
    """64-token partitions over contexts up to 150 tokens exercise the split and the combine."""
    _check([150, 5, 64, 97], 6, 2, 40, block_size, dtype, partition_size=64)


def test_multi_query_attention():
    """One kv head for eight query heads (MQA) on the split path."""
    _check([33, 80], 8, 1, 32, 16, torch.float32, partition_size=32)


def test_partition_must_be_a_multiple_of_the_block():
    q, kc, vc, tables, lens = _inputs([20], 2, 1, 16, 16, torch.float32)
    with pytest.raises(ValueError, match="multiple of the block size"):
        op.paged_attention_decode(q, kc, vc, tables, lens, 20, partition_size=24)


def test_opcheck():
    """Schema, fake tensor and AOT dispatch (split path)."""
    q, kc, vc, tables, lens = _inputs([20, 3], 2, 1, 16, 16, torch.float32)
    torch.library.opcheck(
        torch.ops.pocforge.paged_attention_decode.default, (q, kc, vc, tables, lens, 20, 0.25, 16)
    )
