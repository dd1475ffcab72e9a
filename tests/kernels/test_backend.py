"""The POCFORGE_KERNELS switch: every op reaches its reference, and no Triton launch happens."""

import importlib

import pytest
import torch

from pocforge_kernels import OPS, backend, load, load_all
from pocforge_kernels.fp8_quant import ref as quant_ref
from pocforge_kernels.rotary_embedding.ref import build_cos_sin_cache

load_all()
OP_MODULES = sorted({f"pocforge_kernels.{target.split(':')[0]}.op" for target in OPS.values()})


def _cases():
    """(public function, args, reference) for every public op, at tiny sizes."""
    x = torch.randn(3, 64)
    w = torch.randn(64)
    a, a_s = quant_ref.per_token_quant_fp8(torch.randn(3, 128), torch.float8_e4m3fn)
    b, b_s = quant_ref.per_block_quant_fp8(torch.randn(5, 128), torch.float8_e4m3fn)
    qkv = torch.randn(4, 2, 16)
    cu = torch.tensor([0, 1, 4], dtype=torch.int32)
    cache = torch.randn(4, 16, 1, 16)
    tables = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    lens = torch.tensor([17, 5], dtype=torch.int32)
    latent = torch.randn(3, 16, 576)
    w13, w2 = torch.randn(4, 32, 64), torch.randn(4, 64, 16)
    logits = torch.randn(3, 4)
    from pocforge_kernels.flash_attention_prefill import ref as fa
    from pocforge_kernels.fused_moe import ref as moe
    from pocforge_kernels.mla_decode import ref as mla
    from pocforge_kernels.paged_attention_decode import ref as pa
    from pocforge_kernels.rms_norm import ref as norm

    routing = moe.topk_softmax(logits, 2, True)
    return {
        "rms_norm": ((x, w, 1e-6), lambda: norm.rms_norm(x, w, 1e-6)),
        "silu_and_mul": ((x,), lambda: torch.nn.functional.silu(x[:, :32]) * x[:, 32:]),
        "gelu_and_mul": ((x,), lambda: torch.nn.functional.gelu(x[:, :32]) * x[:, 32:]),
        "per_token_quant_fp8": (
            (x, torch.float8_e4m3fn),
            lambda: quant_ref.per_token_quant_fp8(x, torch.float8_e4m3fn),
        ),
        "per_block_quant_fp8": (
            (x, torch.float8_e4m3fnuz),
            lambda: quant_ref.per_block_quant_fp8(x, torch.float8_e4m3fnuz),
        ),
        "fp8_gemm": (
            (a, a_s, b, b_s, torch.float32),
            lambda: quant_ref.dequantize(a, a_s) @ quant_ref.dequantize(b, b_s).T,
        ),
        "flash_attention_prefill": (
            (qkv, qkv, qkv, cu, 3, 0.25),
            lambda: fa.flash_attention_prefill(qkv, qkv, qkv, cu, 0.25),
        ),
        "paged_attention_decode": (
            (qkv[:2], cache, cache, tables, lens, 17, 0.25),
            lambda: pa.paged_attention_decode(qkv[:2], cache, cache, tables, lens, 0.25),
        ),
        "topk_softmax": ((logits, 2, True), lambda: moe.topk_softmax(logits, 2, True)),
        "fused_experts": ((x, w13, w2, *routing), lambda: moe.fused_experts(x, w13, w2, *routing)),
        "fused_moe": ((x, w13, w2, logits, 2), lambda: moe.fused_moe(x, w13, w2, logits, 2, False)),
        "mla_decode": (
            (latent[:2], latent, tables, lens, 17, 0.1),
            lambda: mla.mla_decode(latent[:2], latent, tables, lens, 0.1, 512),
        ),
    }


@pytest.fixture
def launches_forbidden(monkeypatch):
    """Replace every Triton launcher with one that fails the test if it is called."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a Triton launcher ran under POCFORGE_KERNELS=reference")

    for name in OP_MODULES:
        module = importlib.import_module(name)
        for attr in dir(module):
            if attr.startswith("launch"):
                monkeypatch.setattr(module, attr, forbidden)


def test_every_public_op_has_a_case():
    assert set(_cases()) | {"rotary_embedding", "rms_norm"} >= set(OPS)


@pytest.mark.usefixtures("reference_backend", "launches_forbidden")
@pytest.mark.parametrize("name", sorted(_cases()))
def test_reference_switch_routes_every_op_to_its_reference(name):
    """With POCFORGE_KERNELS=reference the op returns exactly what its reference returns."""
    args, reference = _cases()[name]
    got, want = load(name)(*args), reference()
    for g, w in zip(
        torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want), strict=True
    ):
        torch.testing.assert_close(g.float(), w.float(), rtol=1e-6, atol=1e-6)


@pytest.mark.usefixtures("reference_backend", "launches_forbidden")
def test_reference_switch_covers_in_place_and_backward_ops():
    """rotary_embedding (in place) and the RMSNorm backward also stay on the reference."""
    q = torch.randn(3, 32)
    want = q.clone()
    cache = build_cos_sin_cache(8, 16)
    positions = torch.tensor([0, 5, 7])
    load("rotary_embedding")(positions, q, None, 16, cache, True)
    from pocforge_kernels.rotary_embedding import ref as rope

    rope.rotary_embedding(positions, want, None, 16, cache, True)
    assert torch.equal(q, want)
    x = torch.randn(2, 8, requires_grad=True)
    load("rms_norm")(x, torch.ones(8), 1e-6, residual=torch.zeros(2, 8))[0].sum().backward()
    assert torch.isfinite(x.grad).all()


def test_unknown_backend_is_refused(monkeypatch):
    monkeypatch.setenv(backend.BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match="POCFORGE_KERNELS"):
        backend.use_reference()


def test_default_backend_is_triton(monkeypatch):
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    assert backend.backend() == "triton"


def test_cpu_tensors_without_the_interpreter_get_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        load("silu_and_mul")(torch.randn(2, 8))
