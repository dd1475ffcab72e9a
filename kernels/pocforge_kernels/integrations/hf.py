"""Swap pocforge kernels into a Hugging Face Llama model (Liger-Kernel's module patching).

:func:`patch_llama` replaces, on one model instance, the ``forward`` of every
``LlamaRMSNorm`` (-> ``pocforge::rms_norm``) and ``LlamaMLP``
(-> ``pocforge::silu_and_mul``), and the module-level ``apply_rotary_pos_emb`` of
``transformers.models.llama.modeling_llama`` (-> ``pocforge::rotary_embedding``).
The RoPE swap is process-wide, exactly like Liger's
``apply_liger_kernel_to_llama``, because Llama's attention calls that function by
its module name.  All three are differentiable, so patched models train::

    patch = patch_llama(model)
    ...train...
    patch.undo()                    # or: with patch_llama(model): ...

What is not fused: the MLP still runs its gate and up projections separately
and concatenates them for ``silu_and_mul``; RoPE copies q and k into the
token-major layout the kernel rotates in place.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import torch

from ..act_and_mul import silu_and_mul
from ..rms_norm import rms_norm
from ..rotary_embedding import rotary_embedding

SILU_NAMES = ("silu", "swish")


class _Rotary(torch.autograd.Function):
    """NeoX rotation of HF-layout ``q [B, Hq, S, D]``, ``k [B, Hk, S, D]`` by ``cos, sin``.

    HF's cos/sin hold each angle twice (``cat(freqs, freqs)``); the first half of
    each row, per token, is exactly a ``cos_sin_cache`` row, so token ``t`` of the
    flattened batch uses cache row ``t``.  The backward rotates the gradients by
    the opposite angle (sin negated): a rotation's transpose is its inverse.
    """

    @staticmethod
    def forward(ctx, q, k, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _Rotary._rotate(q, k, cos, sin)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        cos, sin = ctx.saved_tensors
        dq, dk = _Rotary._rotate(grad_q, grad_k, cos, -sin)
        return dq, dk, None, None

    @staticmethod
    def _rotate(q, k, cos, sin):
        batch, _, seq, head = q.shape
        half = head // 2
        # HF may share one row of angles across the batch ([1, S, D]): expand to every token.
        cos, sin = cos.expand(batch, seq, head), sin.expand(batch, seq, head)
        cache = torch.cat([cos[..., :half], sin[..., :half]], dim=-1).reshape(batch * seq, head)
        positions = torch.arange(batch * seq, device=q.device)
        q_tok = q.transpose(1, 2).contiguous()  # a copy: the op rotates in place
        k_tok = k.transpose(1, 2).contiguous()
        rotary_embedding(
            positions,
            q_tok.view(batch * seq, -1, head),
            k_tok.view(batch * seq, -1, head),
            head,
            cache.to(q.dtype).contiguous(),
            True,
        )
        return q_tok.transpose(1, 2), k_tok.transpose(1, 2)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """Drop-in for ``modeling_llama.apply_rotary_pos_emb`` (HF's default layout only)."""
    if unsqueeze_dim != 1:
        raise ValueError("pocforge's apply_rotary_pos_emb supports unsqueeze_dim=1 only")
    return _Rotary.apply(q, k, cos, sin)


def _rms_norm_forward(self, hidden_states):
    return rms_norm(hidden_states, self.weight, self.variance_epsilon)


def _mlp_forward(self, x):
    gate_up = torch.cat([self.gate_proj(x), self.up_proj(x)], dim=-1)
    return self.down_proj(silu_and_mul(gate_up))


@dataclass
class Patch:
    """What :func:`patch_llama` changed, so it can be undone (also a context manager)."""

    modules: list = field(default_factory=list)
    rope_module: types.ModuleType | None = None
    rope_original: object = None

    def undo(self) -> None:
        for module in self.modules:
            del module.forward  # the instance attribute; the class forward shows through again
        self.modules.clear()
        if self.rope_module is not None:
            self.rope_module.apply_rotary_pos_emb = self.rope_original
            self.rope_module = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()


def patch_llama(
    model: torch.nn.Module, *, rms_norm: bool = True, swiglu: bool = True, rope: bool = True
) -> Patch:
    """Swap pocforge's RMSNorm, SiLU-and-mul and RoPE into a ``transformers`` Llama model."""
    from transformers.models.llama import modeling_llama

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type != "llama":
        raise ValueError(f"patch_llama: model_type {model_type!r} is not 'llama'")
    patch = Patch()
    for module in model.modules():
        if rms_norm and isinstance(module, modeling_llama.LlamaRMSNorm):
            module.forward = types.MethodType(_rms_norm_forward, module)
            patch.modules.append(module)
        elif swiglu and isinstance(module, modeling_llama.LlamaMLP):
            if module.config.hidden_act not in SILU_NAMES:
                act = module.config.hidden_act
                raise ValueError(f"patch_llama: hidden_act {act!r} is not SiLU")
            module.forward = types.MethodType(_mlp_forward, module)
            patch.modules.append(module)
    if rope:
        patch.rope_module = modeling_llama
        patch.rope_original = modeling_llama.apply_rotary_pos_emb
        modeling_llama.apply_rotary_pos_emb = apply_rotary_pos_emb
    return patch
