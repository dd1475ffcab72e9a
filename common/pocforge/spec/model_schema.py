"""The spec's `model:` section: the model under test, its weights' staging, the tiny model the kit builds.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    SecretStr,
)

from pocforge.catalog import ModelFacts
from pocforge.spec.base import SECRET, Strict


class TinyModel(Strict):
    arch: Literal["llama", "qwen-moe"] = Field(
        "llama",
        description="Architecture of the tiny random-initialised model the kit builds locally.",
    )
    seed: int = Field(0, ge=0, description="Seed for weights and tokenizer: same seed, same bytes.")


CONTROLLER = "controller:"


class WeightsStaging(Strict):
    source: str = Field(
        min_length=1,
        description="Where the weights are: a path every node sees (NFS, Lustre), `s3://bucket/prefix`, `hf://org/name` (a mirror), or `controller:<folder>`, a folder on the machine that runs the kit (relative: to the POC folder) copied to each node over its connection (small models; nodes without shared storage, as a rehearsal's).",
    )
    dest: str = Field(
        "/opt/pocforge/models/model",
        description="Local folder on every node that receives them (bring-up copies once).",
    )


class ModelSpec(Strict):
    id: str = Field(
        min_length=1,
        description="Hugging Face model id (`org/name`) or a local folder (relative to the POC folder).",
    )
    served_name: str | None = Field(
        None, description="Name clients use in requests; defaults to `id`."
    )
    revision: str | None = Field(None, description="Hub revision (commit or tag) to pin.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weights and activations dtype."
    )
    quantization: Literal["none", "fp8", "fp8_block", "int8", "awq", "gptq", "mxfp4"] = Field(
        "none",
        description="Weight quantization, passed as the framework's `--quantization` (`spec/quantization.py`): `fp8` a checkpoint's own FP8 or online per-tensor FP8; `fp8_block` a block-FP8 checkpoint such as DeepSeek-V3's (passed as `fp8`; the block size comes from its config.json); `int8` SGLang's `w8a8_int8` (vLLM has no such flag: refused); `awq`, `gptq`, `mxfp4` as named.",
    )
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="KV-cache dtype."
    )
    max_model_len: int | None = Field(
        None, ge=1, description="Longest sequence (prompt + output) to serve."
    )
    facts: ModelFacts | None = Field(
        None,
        description="Architecture facts for models whose `config.json` is not at hand; they override what the config says.",
    )
    weights: WeightsStaging | None = Field(
        None, description="Stage the weights to every node's local disk during bring-up."
    )
    tiny: TinyModel | None = Field(
        None,
        description="Build a tiny random model into `id` (a local folder) instead of using real weights; for CPU demos and tests.",
    )
    hf_token: SecretStr | None = Field(
        None, description="Hub token for gated models; use `${HF_TOKEN}`.", json_schema_extra=SECRET
    )
