"""vLLM general plugin: the kit's kernels as vLLM out-of-tree custom ops.

Entry point (``pyproject.toml``)::

    [project.entry-points."vllm.general_plugins"]
    pocforge_kernels = "pocforge_kernels.integrations.vllm_plugin:register"

vLLM calls :func:`register` in every process it starts (API server, engine core,
workers), and calls every installed general plugin when ``VLLM_PLUGINS`` is unset, so
``register`` does nothing unless ``POCFORGE_VLLM_KERNELS`` names kit ops, and is
idempotent.  For each named op that has a vLLM layer (:data:`LAYERS`) it registers a
subclass of that layer with ``CustomOp.register_oot``; vLLM's ``CustomOp.__new__``
then builds the subclass wherever a model builds the layer (see :mod:`.vllm_layers`).

Enabling is vLLM's: a custom op runs its ``forward_<platform>`` (here: the kit
kernel) only when ``compilation_config.custom_ops`` enables it (``"+rms_norm"``, or
``"all"`` without ``"-rms_norm"``); otherwise the layer runs vLLM's
``forward_native``.  :func:`custom_ops` gives the entries to pass, so the flags enter
vLLM's compilation-cache hash like any other config.

Proof lines on the process's stderr (which the kit's launcher writes to the server
log), each once per process::

    pocforge-kernels: registered rms_norm, silu_and_mul as vLLM out-of-tree custom ops (pid 7)
    pocforge-kernels: RMSNorm -> pocforge_kernels.integrations.vllm_layers.PocforgeRMSNorm \
(custom op rms_norm enabled) (pid 9)
    pocforge-kernels: rms_norm ran (triton) on (5, 128) torch.float32 (pid 9)

This module imports neither vLLM nor torch until :func:`register` finds work to do.
"""

from __future__ import annotations

from . import support
from .proof import LOG_PREFIX, say, selected

SELECT_ENV = "POCFORGE_VLLM_KERNELS"

# Kit op -> (vLLM module, in-tree class whose name CustomOp.__new__ looks up, the
# in-tree CustomOp name that compilation_config.custom_ops enables), from the one table of
# which op runs where (.support), which the kit's validate reads too.
LAYERS: dict[str, tuple[str, str, str]] = {
    op: (*layer.replaces.rsplit(".", 1), layer.custom_op)
    for op, layer in support.layers("vllm").items()
}

_registered: set[str] = set()


def custom_ops(kernels: list[str]) -> list[str]:
    """``compilation_config.custom_ops`` entries that turn on the vLLM layers of ``kernels``.

    ``["+rms_norm", "+unquantized_fused_moe", ...]``; kit ops without a vLLM layer are
    left out.  Prepend ``"none"`` to run only these as custom ops (what the kit's vLLM
    adapter passes).
    """
    return [f"+{LAYERS[k][2]}" for k in kernels if k in LAYERS]


def register() -> None:
    """vLLM's hook: register the selected ops' layers out of tree (no-op when none are named)."""
    ops = selected(SELECT_ENV)
    if not ops:
        return
    for name in ops:
        if name not in LAYERS:
            say(f"{name} has no vLLM layer; vLLM's own implementation stays", once=f"skip:{name}")
    todo = [name for name in ops if name in LAYERS and name not in _registered]
    if not todo:
        return
    from vllm.model_executor.custom_op import CustomOp, op_registry_oot

    from . import vllm_layers

    for name in todo:
        _, in_tree, op_name = LAYERS[name]
        layer = vllm_layers.LAYER_CLASSES[name]
        if in_tree not in op_registry_oot:
            CustomOp.register_oot(name=in_tree)(layer)
        elif op_registry_oot[in_tree] is not layer:
            other = op_registry_oot[in_tree]
            raise RuntimeError(
                f"{LOG_PREFIX} {in_tree} is already replaced by {other.__module__}."
                f"{other.__qualname__} (another plugin); cannot register {name}"
            )
        # register_oot renames the class to its registry key ("RMSNorm"), but enabled()
        # looks for f"+{cls.name}" in compilation_config.custom_ops: keep vLLM's op name.
        layer.name = op_name
        _registered.add(name)
    say(f"registered {', '.join(todo)} as vLLM out-of-tree custom ops")
