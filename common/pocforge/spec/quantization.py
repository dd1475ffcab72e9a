"""What ``model.quantization`` becomes in each serving framework: its ``--quantization``.

One table for the adapters (``frameworks/vllm.py``, ``frameworks/sglang.py``) and the spec
rule that refuses a value a framework has no flag for (``spec/serving_rules.py``), so no value is
dropped on the way to the server. ``None``: no flag (the checkpoint is served as it is).

- ``fp8``: FP8 weights: a checkpoint's own FP8 format (per-tensor or block, as its
  ``config.json`` says), or the framework's online per-tensor FP8 of an unquantized one;
- ``fp8_block``: a checkpoint already in block-scaled FP8 (DeepSeek-V3, Qwen3-FP8); both
  frameworks take it as ``fp8`` and read the block size from its ``quantization_config``
  (vLLM's online block shorthand ``fp8_per_block`` would clash with such a checkpoint's
  own method and stop the server);
- ``int8``: SGLang's ``w8a8_int8`` (an INT8 W8A8 checkpoint); vLLM has no such flag.

TensorRT-LLM's ``trtllm-serve`` has no ``--quantization``: its PyTorch backend reads the
method from the checkpoint (a ModelOpt checkpoint's ``hf_quant_config.json``, or the
``quantization_config`` of its ``config.json``) and never quantizes online. So ``fp8``,
``fp8_block`` and ``mxfp4`` name what a pre-quantized checkpoint holds
(``nvidia/Llama-3.1-70B-Instruct-FP8``, DeepSeek-V3's block FP8, gpt-oss's MXFP4) and pass
no flag; the kit's TensorRT-LLM plans cover no INT8, AWQ or GPTQ checkpoint.
"""

from __future__ import annotations

FLAGS: dict[str, dict[str, str | None]] = {
    "vllm": {
        "none": None,
        "fp8": "fp8",
        "fp8_block": "fp8",
        "awq": "awq",
        "gptq": "gptq",
        "mxfp4": "mxfp4",
    },
    "sglang": {
        "none": None,
        "fp8": "fp8",
        "fp8_block": "fp8",
        "int8": "w8a8_int8",
        "awq": "awq",
        "gptq": "gptq",
        "mxfp4": "mxfp4",
    },
    "trtllm": {"none": None, "fp8": None, "fp8_block": None, "mxfp4": None},
}
# What to write instead, for a value a framework has no flag for.
INSTEAD: dict[tuple[str, str], str] = {
    ("vllm", "int8"): (
        "an INT8 checkpoint (compressed-tensors, e.g. from llm-compressor) names its method in "
        "its config.json, so write quantization: none; online INT8 of MoE experts is "
        "serving.engine_args {quantization: experts_int8}"
    ),
    **{
        ("trtllm", method): (
            "TensorRT-LLM reads the quantization from a pre-quantized checkpoint (ModelOpt's "
            "hf_quant_config.json) and the kit's trtllm plans cover fp8, fp8_block and mxfp4 "
            "ones; serve this checkpoint with vllm or sglang"
        )
        for method in ("int8", "awq", "gptq")
    },
}


def quantization_flag(framework: str, quantization: str) -> str | None:
    """The ``--quantization`` value for ``framework`` (None: no flag); raises ``ValueError``
    for a value validate refuses (:func:`quantization_problem`)."""
    problem = quantization_problem(framework, quantization)
    if problem:
        raise ValueError(problem)
    return FLAGS[framework][quantization]


def quantization_problem(framework: str, quantization: str) -> str | None:
    """Why ``quantization`` cannot be served by ``framework`` (None: it has a flag)."""
    if quantization in FLAGS[framework]:
        return None
    instead = INSTEAD.get((framework, quantization), "choose another quantization")
    return f"{framework} has no --quantization for {quantization}: {instead}"
