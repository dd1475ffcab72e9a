"""Scaled fp8 GEMM with per-token/per-channel and block scales against a float64 reference."""

import pytest
import torch

from pocforge_kernels.fp8_gemm import op, ref
from pocforge_kernels.fp8_quant import ref as quant
from pocforge_kernels.testing import assert_close

FP8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz]
LAYOUTS = {
    "token_x_channel": (
        lambda x, f: quant.per_token_quant_fp8(x, f),
        lambda w, f: quant.per_token_quant_fp8(w, f),
    ),
    "group_x_block": (
        lambda x, f: quant.per_token_quant_fp8(x, f, 128),
        lambda w, f: quant.per_block_quant_fp8(w, f),
    ),
    "token_x_block": (
        lambda x, f: quant.per_token_quant_fp8(x, f),
        lambda w, f: quant.per_block_quant_fp8(w, f),
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("fp8_dtype", FP8, ids=["fn", "fnuz"])
@pytest.mark.parametrize("mnk", [(7, 45, 256), (33, 130, 384)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_matches_reference(layout, fp8_dtype, mnk, out_dtype):
    """The kernel equals dequant(A) @ dequant(B).T computed in float64, rounded to out_dtype."""
    m, n, k = mnk
    quant_a, quant_b = LAYOUTS[layout]
    a, a_scale = quant_a(torch.randn(m, k), fp8_dtype)
    b, b_scale = quant_b(torch.randn(n, k), fp8_dtype)
    out = op.fp8_gemm(a, a_scale, b, b_scale, out_dtype)
    assert out.dtype == out_dtype
    want = ref.fp8_gemm(a.double(), a_scale.double(), b.double(), b_scale.double(), torch.float64)
    assert_close(out, want, out_dtype)


def test_odd_k_with_per_token_scales():
    """K that is not a multiple of the K step (per-token scales allow any K)."""
    a, a_scale = quant.per_token_quant_fp8(torch.randn(5, 100), torch.float8_e4m3fn)
    b, b_scale = quant.per_token_quant_fp8(torch.randn(9, 100), torch.float8_e4m3fn)
    want = ref.fp8_gemm(a.double(), a_scale.double(), b.double(), b_scale.double(), torch.float64)
    assert_close(op.fp8_gemm(a, a_scale, b, b_scale, torch.float32), want, torch.float32)


def test_bad_scale_shape_is_refused():
    a, a_scale = quant.per_token_quant_fp8(torch.randn(4, 128), torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="b_scale"):
        op.fp8_gemm(a, a_scale, a, torch.ones(2, 3), torch.float32)


def test_opcheck():
    """Fake tensor, autograd registration and AOT dispatch.

    test_schema is left out: torch's SchemaCheckMode compares inputs before and
    after the call with a multiplication that the CPU does not implement for fp8.
    """
    a, a_scale = quant.per_token_quant_fp8(torch.randn(3, 128), torch.float8_e4m3fn, 128)
    b, b_scale = quant.per_block_quant_fp8(torch.randn(20, 128), torch.float8_e4m3fn)
    torch.library.opcheck(
        torch.ops.pocforge.fp8_gemm.default,
        (a, a_scale, b, b_scale, torch.bfloat16),
        test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"),
    )
