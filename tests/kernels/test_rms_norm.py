"""RMSNorm kernel (forward, fused residual add, backward) against its float64 reference."""

import pytest
import torch

from pocforge_kernels.rms_norm import op, ref
from pocforge_kernels.testing import assert_close

SHAPES = [(7, 257), (2, 3, 64), (1, 1000)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _inputs(shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    w = (1 + 0.1 * torch.randn(shape[-1])).to(dtype)
    return x, w


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_matches_reference(shape, dtype):
    """Every element equals the float64 reference within the dtype's tolerance."""
    x, w = _inputs(shape, dtype)
    out = op.rms_norm(x, w, 1e-6)
    assert out.dtype == dtype
    assert_close(out, ref.rms_norm(x.double(), w.double(), 1e-6), dtype)


@pytest.mark.parametrize("shape", SHAPES[:2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_residual_add_matches_reference(shape, dtype):
    """The fused op returns the normalised sum and the new residual stream."""
    x, w = _inputs(shape, dtype)
    residual = torch.randn(shape, dtype=dtype)
    out, new_residual = op.rms_norm(x, w, 1e-5, residual=residual)
    want_out, want_residual = ref.fused_add_rms_norm(
        x.double(), residual.double(), w.double(), 1e-5
    )
    assert_close(new_residual, want_residual, dtype, "residual")
    assert_close(out, want_out, dtype, "output")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_matches_autograd_of_reference(dtype):
    """dx and dw from the backward kernel equal autograd through the float64 reference."""
    x, w = _inputs((5, 123), dtype)
    x.requires_grad_(True)
    w.requires_grad_(True)
    grad = torch.randn_like(x)
    op.rms_norm(x, w, 1e-6).backward(grad)

    x64 = x.detach().double().requires_grad_(True)
    w64 = w.detach().double().requires_grad_(True)
    ref.rms_norm(x64, w64, 1e-6).backward(grad.double())
    assert_close(x.grad, x64.grad, dtype, "dx")
    assert_close(w.grad, w64.grad, dtype, "dw")


def test_fused_backward_reaches_both_inputs():
    """Gradients of the fused op flow to x and residual (through y and the new residual)."""
    x, w = _inputs((4, 96), torch.float32)
    residual = torch.randn(4, 96)
    leaves = [t.clone().requires_grad_(True) for t in (x, residual, w)]
    out, new_residual = op.rms_norm(leaves[0], leaves[2], 1e-6, residual=leaves[1])
    (out.sum() + 2 * new_residual.sum()).backward()

    leaves64 = [t.double().requires_grad_(True) for t in (x, residual, w)]
    out64, res64 = ref.fused_add_rms_norm(leaves64[0], leaves64[1], leaves64[2], 1e-6)
    (out64.sum() + 2 * res64.sum()).backward()
    for got, want in zip(leaves, leaves64, strict=True):
        assert_close(got.grad, want.grad, torch.float32)


def test_reference_backward_formula_matches_autograd():
    """ref.rms_norm_backward (the spec of the backward kernel) equals autograd of ref.rms_norm."""
    x = torch.randn(3, 40, dtype=torch.float64, requires_grad=True)
    w = torch.randn(40, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(3, 40, dtype=torch.float64)
    ref.rms_norm(x, w, 1e-6).backward(grad)
    dx, dw = ref.rms_norm_backward(grad, x.detach(), w.detach(), 1e-6)
    assert_close(dx, x.grad, torch.float64)
    assert_close(dw, w.grad, torch.float64)


def test_opcheck():
    """Schema, fake tensor, autograd registration and AOT dispatch of every RMSNorm op."""
    x = torch.randn(3, 32, requires_grad=True)
    w = torch.randn(32, requires_grad=True)
    r = torch.randn(3, 32)
    torch.library.opcheck(torch.ops.pocforge.rms_norm.default, (x, w, 1e-6))
    torch.library.opcheck(torch.ops.pocforge.fused_add_rms_norm.default, (x, r, w, 1e-6))
    torch.library.opcheck(
        torch.ops.pocforge.rms_norm_backward.default,
        (torch.randn(3, 32), x.detach(), w.detach(), 1e-6),
    )


def test_torch_compile_traces_the_custom_op_without_graph_breaks():
    """fullgraph=True: dynamo keeps pocforge::fused_add_rms_norm as one node via its fake."""
    torch._dynamo.reset()

    def block(x, residual, w):
        out, residual = op.rms_norm(x, w, 1e-6, residual=residual)
        return out * 2, residual

    x, w = _inputs((5, 48), torch.float32)
    residual = torch.randn(5, 48)
    # aot_eager runs dynamo, fake tensors and AOT autograd, everything a custom op must
    # support; inductor would add ~10 s of C++ codegen for the surrounding `* 2` only.
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got, got_residual = compiled(x, residual, w)
    want, want_residual = block(x, residual, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_residual, want_residual)
