"""A tiny random Llama trains to the same losses with pocforge's RMSNorm, SiLU-and-mul and RoPE.

Mirrors kernels/pocforge_kernels/integrations/hf.py.  The model is built locally from a
LlamaConfig (no downloads); both runs start from the same seeded weights and
see the same batch, in fp32.
"""

import pytest
import torch

from pocforge_kernels.integrations import hf

transformers = pytest.importorskip("transformers")

STEPS = 3
LOSS_RTOL = 1e-4  # fp32 kernels against fp32 torch, compounded over a few optimizer steps


def _tiny_llama(seed):
    config = transformers.LlamaConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=112,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config)


def _train(model, batches):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for ids in batches:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.fixture
def counted_kernels(monkeypatch):
    """Count calls of the three kernels the patch should route through."""
    calls = {"rms_norm": 0, "silu_and_mul": 0, "rotary_embedding": 0}
    for name in calls:
        original = getattr(hf, name)

        def counting(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(hf, name, counting)
    return calls


def test_patched_llama_trains_like_the_stock_model(fresh_seed, counted_kernels):
    """Per-step losses agree within 1e-4 and fall; every patched kernel actually ran."""
    generator = torch.Generator().manual_seed(fresh_seed)
    # One batch, seen every step: the loss must fall as the model memorises it.
    batches = [torch.randint(0, 96, (2, 8), generator=generator)] * STEPS
    stock = _train(_tiny_llama(fresh_seed), batches)

    model = _tiny_llama(fresh_seed)
    with hf.patch_llama(model):
        patched = _train(model, batches)

    torch.testing.assert_close(torch.tensor(patched), torch.tensor(stock), rtol=LOSS_RTOL, atol=0)
    assert patched[-1] < patched[0]
    assert all(count > 0 for count in counted_kernels.values()), counted_kernels


def test_undo_restores_the_stock_model():
    """After undo, forwards and the module-level RoPE function are the originals again."""
    from transformers.models.llama import modeling_llama

    model = _tiny_llama(0)
    original_rope = modeling_llama.apply_rotary_pos_emb
    patch = hf.patch_llama(model)
    assert modeling_llama.apply_rotary_pos_emb is hf.apply_rotary_pos_emb
    assert "forward" in vars(model.model.norm)
    patch.undo()
    assert modeling_llama.apply_rotary_pos_emb is original_rope
    assert "forward" not in vars(model.model.norm)


def test_rope_gradients_match_hf():
    """The inverse-rotation backward equals autograd through HF's rotate_half formula."""
    from transformers.models.llama import modeling_llama

    q = torch.randn(2, 4, 5, 16, dtype=torch.float64)
    k = torch.randn(2, 2, 5, 16, dtype=torch.float64)
    angles = torch.rand(2, 5, 8, dtype=torch.float64) * 6
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    leaves = [t.clone().float().requires_grad_(True) for t in (q, k)]
    out_q, out_k = hf.apply_rotary_pos_emb(*leaves, cos.float(), sin.float())
    (out_q.square().sum() + out_k.sum()).backward()
    leaves64 = [t.clone().requires_grad_(True) for t in (q, k)]
    want_q, want_k = modeling_llama.apply_rotary_pos_emb(*leaves64, cos, sin)
    (want_q.square().sum() + want_k.sum()).backward()
    torch.testing.assert_close(out_q.double(), want_q, rtol=1e-5, atol=1e-5)
    for got, want in zip(leaves, leaves64, strict=True):
        torch.testing.assert_close(got.grad.double(), want.grad, rtol=1e-5, atol=1e-5)
