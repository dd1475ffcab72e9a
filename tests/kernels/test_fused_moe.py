"""Fused MoE: routing, expert sort/align, grouped GEMMs and combine against float64 references."""

import pytest
import torch

from pocforge_kernels.fused_moe import op, ref
from pocforge_kernels.fused_moe.align import align_block_size
from pocforge_kernels.testing import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (tokens, hidden, intermediate, experts, top_k): Mixtral-like 8/2, Qwen-MoE-like many/4, top-1
CASES = [(7, 64, 48, 8, 2), (5, 32, 40, 16, 4), (9, 48, 32, 4, 1)]


def _weights(hidden, inter, experts, dtype):
    w13 = torch.randn(experts, 2 * inter, hidden, dtype=dtype) / hidden**0.5
    w2 = torch.randn(experts, hidden, inter, dtype=dtype) / inter**0.5
    return w13, w2


@pytest.mark.parametrize("renormalize", [True, False], ids=["renorm", "plain"])
@pytest.mark.parametrize("experts,top_k", [(8, 2), (60, 4), (5, 5)])
def test_topk_softmax_matches_reference(experts, top_k, renormalize):
    """Same experts in the same order and the same weights as softmax + topk in float64."""
    logits = torch.randn(11, experts)
    weights, ids = op.topk_softmax(logits, top_k, renormalize)
    want_w, want_ids = ref.topk_softmax(logits.double(), top_k, renormalize)
    assert torch.equal(ids, want_ids)
    assert_close(weights, want_w, torch.float32)


def test_align_groups_pairs_by_expert_in_row_blocks():
    """Every pair appears once; each 4-row block holds one expert's pairs or padding."""
    ids = torch.tensor([[2, 0], [2, 1], [0, 2], [3, 2]], dtype=torch.int32)
    sorted_ids, expert_ids = align_block_size(ids, num_experts=5, block_m=4)
    sentinel = ids.numel()
    real = sorted_ids[sorted_ids < sentinel]
    assert sorted(real.tolist()) == list(range(sentinel))
    for block, expert in enumerate(expert_ids.tolist()):
        rows = sorted_ids[block * 4 : (block + 1) * 4]
        pairs = rows[rows < sentinel].long()
        if expert < 0:
            assert pairs.numel() == 0
        else:
            assert (ids.view(-1)[pairs] == expert).all()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_moe_matches_reference(case, dtype):
    """The whole layer (routing, GEMMs, SiLU-and-mul, combine) equals the float64 reference."""
    tokens, hidden, inter, experts, top_k = case
    x = torch.randn(tokens, hidden, dtype=dtype)
    w13, w2 = _weights(hidden, inter, experts, dtype)
    # Distinct logits (a permutation in steps of 1/8, exact in bf16): with ties, two correct
    # top-k implementations may pick different experts and the comparison would be moot.
    logits = ((torch.rand(tokens, experts).argsort(dim=-1) - experts / 2) / 8).to(dtype)
    out = op.fused_moe(x, w13, w2, logits, top_k, True)
    # Route once in float32 so both sides use the same experts, then compare the experts.
    weights, ids = ref.topk_softmax(logits, top_k, True)
    want = ref.fused_experts(x.double(), w13.double(), w2.double(), weights.double(), ids)
    assert_close(out, want, dtype)


def test_fused_experts_with_external_routing():
    """DeepSeek-style use: routing computed elsewhere, ids that leave some experts unused."""
    x = torch.randn(6, 32)
    w13, w2 = _weights(32, 24, 8, torch.float32)
    ids = torch.tensor([[0, 3]] * 6, dtype=torch.int32)
    weights = torch.rand(6, 2)
    out = op.fused_experts(x, w13, w2, weights, ids)
    want = ref.fused_experts(x.double(), w13.double(), w2.double(), weights.double(), ids)
    assert_close(out, want, torch.float32)


def test_opcheck():
    """Schema, fake tensor and AOT dispatch of the three MoE ops."""
    x = torch.randn(3, 32)
    w13, w2 = _weights(32, 16, 4, torch.float32)
    logits = torch.randn(3, 4)
    weights, ids = ref.topk_softmax(logits, 2, True)
    torch.library.opcheck(torch.ops.pocforge.topk_softmax.default, (logits, 2, True))
    torch.library.opcheck(torch.ops.pocforge.fused_experts.default, (x, w13, w2, weights, ids))
    torch.library.opcheck(torch.ops.pocforge.fused_moe.default, (x, w13, w2, logits, 2, False))
