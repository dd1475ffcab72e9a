"""Gated activations (SiLU, GELU erf and tanh), forward and backward, against float64 references."""

import pytest
import torch

from pocforge_kernels.act_and_mul import op, ref
from pocforge_kernels.testing import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SHAPES = [(7, 2 * 257), (2, 3, 128), (1, 2 * 1100)]
CALLS = {
    "silu": (op.silu_and_mul, ref.silu_and_mul),
    "gelu": (lambda x: op.gelu_and_mul(x), lambda x: ref.gelu_and_mul(x)),
    "gelu_tanh": (lambda x: op.gelu_and_mul(x, "tanh"), lambda x: ref.gelu_and_mul(x, "tanh")),
}


@pytest.mark.parametrize("activation", list(CALLS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_matches_reference(activation, shape, dtype):
    """act(gate) * up for every element, within the dtype's tolerance of float64."""
    kernel, reference = CALLS[activation]
    x = 3 * torch.randn(shape, dtype=dtype)
    out = kernel(x)
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    assert_close(out, reference(x.double()), dtype)


@pytest.mark.parametrize("activation", list(CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_matches_autograd_of_reference(activation, dtype):
    """The backward kernel's analytic derivative equals autograd through the reference."""
    kernel, reference = CALLS[activation]
    x = (3 * torch.randn(5, 2 * 70, dtype=dtype)).requires_grad_(True)
    grad = torch.randn(5, 70, dtype=dtype)
    kernel(x).backward(grad)
    x64 = x.detach().double().requires_grad_(True)
    reference(x64).backward(grad.double())
    assert_close(x.grad, x64.grad, dtype)


def test_unknown_gelu_approximation_is_refused():
    with pytest.raises(ValueError, match="approximate"):
        op.gelu_and_mul(torch.randn(2, 8), "erf")


def test_opcheck():
    """Schema, fake tensor, autograd registration and AOT dispatch of the three ops."""
    x = torch.randn(3, 2 * 24, requires_grad=True)
    torch.library.opcheck(torch.ops.pocforge.silu_and_mul.default, (x,))
    torch.library.opcheck(torch.ops.pocforge.gelu_and_mul.default, (x, "tanh"))
    torch.library.opcheck(
        torch.ops.pocforge.act_and_mul_backward.default, (torch.randn(3, 24), x.detach(), "gelu")
    )
