"""FlashAttention-2 prefill (causal, GQA, packed variable lengths) against a float64 reference."""

import pytest
import torch

from pocforge_kernels.flash_attention_prefill import op, ref
from pocforge_kernels.testing import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (sequence lengths, query heads, kv heads, head size)
CASES = [([5, 17, 1, 33], 4, 2, 32), ([23], 3, 1, 40), ([2, 16, 9], 2, 2, 64)]


def _inputs(lengths, hq, hkv, head, dtype):
    n = sum(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    q, k, v = (torch.randn(n, h, head, dtype=dtype) for h in (hq, hkv, hkv))
    return q, k, v, cu


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(case, dtype, causal):
    """Every token of every sequence and head equals the float64 reference."""
    lengths, hq, hkv, head = case
    q, k, v, cu = _inputs(lengths, hq, hkv, head, dtype)
    scale = head**-0.5
    out = op.flash_attention_prefill(q, k, v, cu, max(lengths), scale, causal)
    want = ref.flash_attention_prefill(q.double(), k.double(), v.double(), cu, scale, causal)
    assert_close(out, want, dtype)


def test_sequences_do_not_see_each_other():
    """Changing one sequence's keys leaves the other sequence's output unchanged."""
    q, k, v, cu = _inputs([6, 7], 2, 1, 16, torch.float32)
    first = op.flash_attention_prefill(q, k, v, cu, 7)
    k[6:] += 1.0
    v[6:] -= 1.0
    second = op.flash_attention_prefill(q, k, v, cu, 7)
    assert torch.equal(first[:6], second[:6])
    assert not torch.equal(first[6:], second[6:])


def test_reference_agrees_with_torch_sdpa():
    """The reference itself equals torch's scaled_dot_product_attention for one sequence."""
    q, k, v, cu = _inputs([9], 4, 2, 16, torch.float64)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, enable_gqa=True
    ).transpose(0, 1)
    assert_close(ref.flash_attention_prefill(q, k, v, cu, 16**-0.5), want, torch.float64)


def test_opcheck():
    """Schema, fake tensor and AOT dispatch."""
    q, k, v, cu = _inputs([3, 5], 2, 1, 16, torch.float32)
    torch.library.opcheck(
        torch.ops.pocforge.flash_attention_prefill.default, (q, k, v, cu, 5, 0.25, True)
    )
