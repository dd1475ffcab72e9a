"""SGLang general plugin: the kit's kernels in SGLang's layers, through SGLang's own hooks.

SGLang 0.5.23 loads general plugins from the ``sglang.srt.plugins`` entry-point group in
every process it starts (server, scheduler, detokenizer), restricted to the names in
``SGLANG_PLUGINS`` when that is set, and then applies the hooks they registered with
``sglang.srt.plugins.hook_registry.HookRegistry``.  :func:`register` is that plugin: for
each kit op named in ``POCFORGE_SGLANG_KERNELS`` it registers a class ``REPLACE`` hook
that swaps the layer class for its kit subclass (:mod:`.sglang_layers`; for ``fused_moe``
the unquantized MoE method, :mod:`.sglang_moe`); SGLang patches the defining module and
every module that imported the class by name.  With no op named it does nothing, and it
is idempotent.

SGLang's environment needs only this distribution, ``pocforge-kernels`` (``pip install
kernels/``, editable or not; the kit itself is not needed): its ``sglang.srt.plugins`` entry
point is what SGLang's loader finds. A launch then needs::

    POCFORGE_SGLANG_KERNELS=rms_norm,silu_and_mul,rotary_embedding
    TRITON_INTERPRET=1                      # CPU only: Triton has no CPU backend

:func:`launch_env` builds exactly that.  It leaves ``SGLANG_PLUGINS`` unset, so SGLang
keeps loading its other installed plugins as it does without the kit; a launch that
sets that whitelist must add ``pocforge_kernels`` to it.  Proof lines
(``pocforge-kernels: ...``) go to stderr as for vLLM (:mod:`.vllm_plugin`).
"""

from __future__ import annotations

from . import support
from .proof import say, selected

SELECT_ENV = "POCFORGE_SGLANG_KERNELS"
PLUGIN_NAME = "pocforge_kernels"  # the entry point's name, for SGLANG_PLUGINS
# Kit ops with an SGLang layer (sglang_layers.LAYER_CLASSES, sglang_moe.MOE_HOOKS), from the
# one table of which op runs where (.support), which the kit's validate reads too.
SGLANG_OPS = tuple(support.layers("sglang"))

_registered: set[str] = set()


def launch_env(kernels: list[str], cpu: bool) -> dict[str, str]:
    """Environment that makes an SGLang server load this plugin for ``kernels``.

    Kit ops without an SGLang layer are left out (and logged by the plugin if named).
    """
    ops = [k for k in kernels if k in SGLANG_OPS]
    if not ops:
        return {}
    env = {SELECT_ENV: ",".join(ops)}
    if cpu:
        env["TRITON_INTERPRET"] = "1"
    return env


def register() -> None:
    """SGLang's hook: replace the selected ops' layer classes (no-op when none are named)."""
    ops = selected(SELECT_ENV)
    if not ops:
        return
    for name in ops:
        if name not in SGLANG_OPS:
            say(f"{name} has no SGLang layer; SGLang's own kernel stays", once=f"skip:{name}")
    todo = [name for name in ops if name in SGLANG_OPS and name not in _registered]
    if not todo:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry

    for name in todo:
        for target, hook, hook_type in _hooks(name):
            HookRegistry.register(target, hook, hook_type)
        _registered.add(name)
    say(f"registered {', '.join(todo)} as SGLang class hooks")


def _hooks(name: str) -> list[tuple[str, object, object]]:
    """``(target, hook, HookType)`` for kit op ``name`` (MoE modules load only when asked)."""
    from sglang.srt.plugins.hook_registry import HookType

    if name == "fused_moe":
        from .sglang_moe import MOE_HOOKS

        return MOE_HOOKS
    from .sglang_layers import LAYER_CLASSES

    target, layer = LAYER_CLASSES[name]
    return [(target, layer, HookType.REPLACE)]
