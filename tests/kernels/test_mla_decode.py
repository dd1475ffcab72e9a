"""MLA decode (latent 512 + rope 64, paged) against float64, and the weight-absorption identity."""

import pytest
import torch

from pocforge_kernels.mla_decode import op, ref
from pocforge_kernels.paged_attention_decode.ref import gather_sequence
from pocforge_kernels.testing import assert_close

RANK, ROPE = 512, 64  # DeepSeek-V2/V3 kv_lora_rank and qk_rope_head_dim
SCALE = (128 + 64) ** -0.5  # DeepSeek-V3: (qk_nope_head_dim + qk_rope_head_dim) ** -0.5


def _inputs(context_lens, heads, block_size, dtype):
    blocks_per_seq = -(-max(context_lens) // block_size)
    num_blocks = len(context_lens) * blocks_per_seq + 2
    kv_cache = torch.randn(num_blocks, block_size, RANK + ROPE, dtype=dtype)
    tables = torch.randperm(num_blocks)[: len(context_lens) * blocks_per_seq]
    tables = tables.view(len(context_lens), blocks_per_seq).to(torch.int32)
    q = torch.randn(len(context_lens), heads, RANK + ROPE, dtype=dtype)
    return q, kv_cache, tables, torch.tensor(context_lens, dtype=torch.int32)


@pytest.mark.parametrize("partition_size", [None, 32], ids=["one_pass", "split_k"])
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_reference(dtype, block_size, partition_size):
    """Heads not a multiple of the head block, ragged contexts, both passes."""
    context_lens = [1, 37, 70]
    q, kv_cache, tables, lens = _inputs(context_lens, 20, block_size, dtype)
    out = op.mla_decode(q, kv_cache, tables, lens, max(context_lens), SCALE, RANK, partition_size)
    want = ref.mla_decode(q.double(), kv_cache.double(), tables, lens, SCALE, RANK)
    assert_close(out, want, dtype)


def test_absorbed_kernel_equals_textbook_mla():
    """W_UK absorbed into q and W_UV into the output reproduce per-head decompressed attention."""
    heads, d_nope, d_v, length = 4, 32, 24, 21
    q, kv_cache, tables, lens = _inputs([length], heads, 16, torch.float64)
    q_nope = torch.randn(heads, d_nope, dtype=torch.float64)
    q_pe = q[0, :, RANK:]
    w_uk = torch.randn(heads, d_nope, RANK, dtype=torch.float64) / RANK**0.5
    w_uv = torch.randn(heads, d_v, RANK, dtype=torch.float64) / RANK**0.5

    absorbed = ref.absorb_query(q_nope[None], q_pe[None], w_uk).float()
    latent_out = op.mla_decode(absorbed, kv_cache.float(), tables, lens, length, SCALE, RANK)
    got = ref.project_output(latent_out.double(), w_uv)[0]

    entries = gather_sequence(kv_cache, tables[0], length)
    want = ref.mla_decode_unabsorbed(
        q_nope, q_pe, entries[:, :RANK], entries[:, RANK:], w_uk, w_uv, SCALE
    )
    assert_close(got, want, torch.float32)


def test_opcheck():
    """Schema, fake tensor and AOT dispatch (split path)."""
    q, kv_cache, tables, lens = _inputs([20, 3], 2, 16, torch.float32)
    torch.library.opcheck(
        torch.ops.pocforge.mla_decode.default, (q, kv_cache, tables, lens, 20, SCALE, RANK, 16)
    )
