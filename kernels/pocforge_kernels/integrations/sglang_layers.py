"""The kit's kernels inside SGLang's layer classes (SGLang 0.5.23), hooked by :mod:`.sglang_hook`.

SGLang's layers are ``BaseFusedOp`` modules (``sglang.kernels.fused_op``): ``forward()``
picks, per process, the first kernel backend in the op's ``priority`` that the class
implements and declares in ``capabilities``, then the platform forward
(``forward_cuda``, ``forward_cpu`` with AMX, ...), then ``forward_native``.  Each class
here subclasses a layer, adds the ``forward_plugin`` backend (``KernelBackend.PLUGIN``,
SGLang's slot for out-of-tree kernel libraries, ahead of AOT/JIT/Triton in the default
priority) declared for every device, and gates it per call with ``backend_eligible``:
a call the kit does not cover falls through to the layer's own platform path, which
computes the same thing.  ``forward_native`` stays SGLang's, so
``SGLANG_FORCE_FUSED_OP_BACKEND=torch`` still runs SGLang's reference, and
``POCFORGE_KERNELS=reference`` runs the kit's.

==================  ===========================================  ==================
SGLang layer        the kit takes the call when                   kit op
==================  ===========================================  ==================
``RMSNorm``         no ``post_residual_addition``, full-row        ``rms_norm`` /
                    variance, the default cast order, no fp32      ``fused_add_rms_norm``
                    residual (a fused FP8 input quant is left to
                    the FP8 linear, as ``forward_native`` does)
``SiluAndMul``      always                                         ``silu_and_mul``
``GeluAndMul``      ``approximate`` is ``"none"`` or ``"tanh"``    ``gelu_and_mul``
``RotaryEmbedding`` 1-D positions, no fused KV-buffer write, no    ``rotary_embedding``
                    precomputed ``sin_cos_cache`` (NPU)            (in place)
==================  ===========================================  ==================

Not covered: subclasses (YaRN, mRoPE, ``GemmaRMSNorm``...) keep SGLang's code, since the
hook replaces the exact class; and torch.compile mode, where ``BaseFusedOp`` switches
every op to ``forward_native`` by design.  The unquantized MoE method is a ``BaseFusedOp``
too and takes the same seam; it lives in :mod:`.sglang_moe`.  Layers that pin ``_forward_method`` in ``__init__`` (aiter
paths) are unpinned so the plugin backend is chosen; a pin to ``forward_native``
(``force_native``, RL on-policy determinism) is kept.
"""

from __future__ import annotations

import torch
from sglang.kernels.spec import KernelBackend
from sglang.srt.layers import activation, layernorm
from sglang.srt.layers.rotary_embedding import base as rotary

from .. import load
from ..backend import backend
from .proof import say

PLUGIN = KernelBackend.PLUGIN


class _KitBackend:
    """Mixin: declare the plugin backend, log the first build and gate calls per op."""

    replaces = ""
    kit_op = ""

    def _kit_init(self) -> None:
        self._kit = load(self.kit_op)
        pinned = self._forward_method
        if pinned is not None and getattr(pinned, "__name__", "") != "forward_native":
            self._forward_method = None  # resolve again: the plugin backend comes first
        chosen = "forward_native (pinned)" if self._forward_method is not None else "plugin"
        cls = type(self)
        say(
            f"{self.replaces} -> {cls.__module__}.{cls.__qualname__} (backend {chosen})",
            once=f"built:{cls.__qualname__}",
        )

    def backend_eligible(self, backend_: KernelBackend, *args, **kwargs) -> bool:
        if backend_ is not PLUGIN:
            return super().backend_eligible(backend_, *args, **kwargs)
        reason = self._kit_skips(*args, **kwargs)
        if reason is None:
            return True
        say(
            f"{self.replaces}: a call with {reason} runs SGLang's own path",
            once=f"fallback:{type(self).__qualname__}:{reason}",
        )
        return False

    def _kit_skips(self, *args, **kwargs) -> str | None:
        """Why the kit does not take this call (None: it does)."""
        return None


def _ran(op: str, x: torch.Tensor) -> None:
    if not torch.compiler.is_compiling():
        say(f"{op} ran ({backend()}) on {tuple(x.shape)} {x.dtype}", once=f"ran:{op}")


def _with_plugin(capabilities) -> dict:
    return {**capabilities, PLUGIN: frozenset()}  # empty set: every device


class PocforgeRMSNorm(_KitBackend, layernorm.RMSNorm):
    """SGLang's ``RMSNorm`` with ``pocforge::rms_norm`` / ``fused_add_rms_norm`` as its plugin."""

    replaces, kit_op = "RMSNorm", "rms_norm"
    capabilities = _with_plugin(layernorm.RMSNorm.capabilities)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit_init()

    def _kit_skips(self, x, residual=None, post_residual_addition=None, quant_linear=None):
        # quant_linear (and fuse_input_quant's _quant_linear) only lets forward_cuda fuse a
        # static FP8 input quant; like forward_native, the kit returns the unquantized
        # output, which that FP8 linear then quantizes itself.
        reasons = {
            "a post-residual addition": post_residual_addition is not None,
            "var_hidden_size": self.variance_size_override is not None,
            "cast_x_before_out_mul": self.cast_x_before_out_mul,
            "an fp32 residual": self.fp32_residual,
            "override_orig_dtype": self.override_orig_dtype is not None,
        }
        return next((reason for reason, hit in reasons.items() if hit), None)

    def forward_plugin(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
        post_residual_addition: torch.Tensor | None = None,
        quant_linear: torch.nn.Module | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        out = self._kit(x, self.weight.data, self.variance_epsilon, residual)
        _ran("rms_norm" if residual is None else "fused_add_rms_norm", x)
        return out


class PocforgeSiluAndMul(_KitBackend, activation.SiluAndMul):
    """SGLang's ``SiluAndMul`` with ``pocforge::silu_and_mul`` as its plugin backend."""

    replaces, kit_op = "SiluAndMul", "silu_and_mul"
    capabilities = _with_plugin(activation.SiluAndMul.capabilities)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit_init()

    def forward_plugin(self, x: torch.Tensor) -> torch.Tensor:
        out = self._kit(x)
        _ran("silu_and_mul", x)
        return out


class PocforgeGeluAndMul(_KitBackend, activation.GeluAndMul):
    """SGLang's ``GeluAndMul`` with ``pocforge::gelu_and_mul`` as its plugin backend."""

    replaces, kit_op = "GeluAndMul", "gelu_and_mul"
    capabilities = _with_plugin(activation.GeluAndMul.capabilities)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit_init()

    def _kit_skips(self, x):
        return None if self.approximate in ("none", "tanh") else f"approximate={self.approximate}"

    def forward_plugin(self, x: torch.Tensor) -> torch.Tensor:
        out = self._kit(x, self.approximate)
        _ran("gelu_and_mul", x)
        return out


class PocforgeRotaryEmbedding(_KitBackend, rotary.RotaryEmbedding):
    """SGLang's plain ``RotaryEmbedding`` with ``pocforge::rotary_embedding`` (in place)."""

    replaces, kit_op = "RotaryEmbedding", "rotary_embedding"
    capabilities = _with_plugin(rotary.RotaryEmbedding.capabilities)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit_init()

    def _kit_skips(self, positions, query, key, offsets=None, fused_set_kv_buffer_arg=None):
        reasons = {
            "a fused KV-buffer write": fused_set_kv_buffer_arg is not None,
            "multi-dimensional positions": positions.ndim != 1,
            "a precomputed sin_cos_cache": hasattr(self, "sin_cos_cache"),
            "forced native (RL on-policy)": self._force_native,
        }
        return next((reason for reason, hit in reasons.items() if hit), None)

    def forward_plugin(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        offsets: torch.Tensor | None = None,
        fused_set_kv_buffer_arg=None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if offsets is not None:
            positions = positions + offsets
        # The kernel reads the cache in fp32 whatever its dtype (SGLang keeps it fp32 on GPUs).
        self._kit(positions, query, key, self.head_size, self.cos_sin_cache, self.is_neox_style)
        _ran("rotary_embedding", query)
        return query, key


# Kit op -> (the class the hook replaces, "module.Class", its kit subclass).
LAYER_CLASSES: dict[str, tuple[str, type]] = {
    "rms_norm": ("sglang.srt.layers.layernorm.RMSNorm", PocforgeRMSNorm),
    "silu_and_mul": ("sglang.srt.layers.activation.SiluAndMul", PocforgeSiluAndMul),
    "gelu_and_mul": ("sglang.srt.layers.activation.GeluAndMul", PocforgeGeluAndMul),
    "rotary_embedding": (
        "sglang.srt.layers.rotary_embedding.base.RotaryEmbedding",
        PocforgeRotaryEmbedding,
    ),
}
