"""Dynamic fp8 quantization (per token, per 1x128 group, per 128x128 block; e4m3fn and fnuz)."""

import pytest
import torch

from pocforge_kernels.fp8_quant import op, ref
from pocforge_kernels.testing import assert_close

FP8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _check(x, q, scale, want_q, want_scale, fp8_dtype):
    assert q.dtype == fp8_dtype and scale.dtype == torch.float32
    assert_close(scale, want_scale, torch.float32, "scale")
    # Same fp32 division, same round-to-nearest-even cast: the codes must be identical.
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)), "fp8 codes differ"
    assert_close(ref.dequantize(q, scale, torch.float64), x.double(), fp8_dtype, "dequantised")


@pytest.mark.parametrize("fp8_dtype", FP8, ids=["fn", "fnuz"])
@pytest.mark.parametrize("shape,group", [((7, 257), None), ((5, 384), 128), ((1, 5000), None)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_per_token(shape, group, dtype, fp8_dtype):
    """Scales are amax/FP8_MAX per row (or 1 x 128 group); codes equal the reference's."""
    x = (torch.randn(shape) * torch.logspace(-2, 2, shape[0])[:, None]).to(dtype)
    q, scale = op.per_token_quant_fp8(x, fp8_dtype, group)
    want_q, want_scale = ref.per_token_quant_fp8(x, fp8_dtype, group)
    assert scale.shape == (shape[0], shape[1] // (group or shape[1]))
    _check(x, q, scale, want_q, want_scale, fp8_dtype)


@pytest.mark.parametrize("fp8_dtype", FP8, ids=["fn", "fnuz"])
@pytest.mark.parametrize("shape", [(257, 300), (128, 128), (40, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_per_block(shape, dtype, fp8_dtype):
    """128 x 128 blocks, ragged edges included, match the reference codes and scales."""
    x = torch.randn(shape).to(dtype)
    q, scale = op.per_block_quant_fp8(x, fp8_dtype)
    want_q, want_scale = ref.per_block_quant_fp8(x, fp8_dtype)
    assert scale.shape == (-(-shape[0] // 128), -(-shape[1] // 128))
    _check(x, q, scale, want_q, want_scale, fp8_dtype)


def test_zero_rows_do_not_divide_by_zero():
    """An all-zero token quantises to zeros with a tiny positive scale, not NaN."""
    x = torch.zeros(3, 64)
    x[1] = torch.randn(64)
    q, scale = op.per_token_quant_fp8(x, torch.float8_e4m3fn)
    assert torch.isfinite(q.float()).all() and (scale > 0).all()
    assert (q[0].float() == 0).all()


def test_saturation_uses_the_format_maximum():
    """The largest element of each row maps to FP8_MAX: 448 (fn) and 240 (fnuz)."""
    x = torch.randn(4, 32)
    for fp8_dtype, fmax in ((torch.float8_e4m3fn, 448.0), (torch.float8_e4m3fnuz, 240.0)):
        q, _ = op.per_token_quant_fp8(x, fp8_dtype)
        assert torch.equal(q.float().abs().amax(-1), torch.full((4,), fmax))


def test_default_dtype_follows_the_architecture(monkeypatch):
    """gfx942 (MI300X/MI325X) gets fnuz; gfx950, sm90 and the CPU get OCP e4m3fn."""
    for arch, want in (
        ("gfx942", torch.float8_e4m3fnuz),
        ("gfx950", torch.float8_e4m3fn),
        ("sm90", torch.float8_e4m3fn),
    ):
        monkeypatch.setenv("POCFORGE_KERNELS_ARCH", arch)
        assert op.default_fp8_dtype() == want


def test_opcheck():
    """Schema, fake tensor and AOT dispatch of both quantization ops."""
    x = torch.randn(3, 256)
    torch.library.opcheck(
        torch.ops.pocforge.per_token_quant_fp8.default, (x, torch.float8_e4m3fn, 128)
    )
    torch.library.opcheck(
        torch.ops.pocforge.per_token_quant_fp8.default, (x, torch.float8_e4m3fnuz, None)
    )
    torch.library.opcheck(
        torch.ops.pocforge.per_block_quant_fp8.default, (x, torch.float8_e4m3fn, 128)
    )
