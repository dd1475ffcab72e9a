"""Check trtllm-serve launches with TensorRT-LLM's own code.

The arguments go through the click parser of the ``serve`` command
(``tensorrt_llm.commands.serve.serve``: unknown flags, bad types and choices), without
running it. Each LLM API option is checked against the field of ``TorchLlmArgs`` (the
LlmArgs of trtllm-serve's PyTorch backend) it names: an unknown key is refused as LlmArgs
refuses it (``extra="forbid"``) and a value must validate as the field's type
(``KvCacheConfig``, ``CudaGraphConfig``, ``MoeConfig``...). The whole LlmArgs is not built:
its validators open the GPU (the dtype check reads the device's compute capability) and load
the model's tokenizer.

Input: JSON list of ``{"argv": [model, flags...], "options": {...}}``; output: JSON list of
error-or-null. A ``tensorrt_llm`` that is installed but cannot load (a CUDA build on a machine
without its libraries) is reported as not importable, like a missing one.
"""

import json
import sys


def _imports():
    try:
        from tensorrt_llm.commands.serve import serve
        from tensorrt_llm.llmapi.llm_args import TorchLlmArgs
    except ModuleNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to load means: not checkable here
        raise ModuleNotFoundError(f"tensorrt_llm cannot be imported here: {exc}") from exc
    return serve, TorchLlmArgs


def _option_problems(fields, options):
    from pydantic import TypeAdapter, ValidationError

    problems = []
    for key, value in (options or {}).items():
        field = fields.get(key)
        if field is None:
            problems.append(f"{key}: not a TorchLlmArgs field (extra inputs are not permitted)")
            continue
        try:
            TypeAdapter(field.annotation).validate_python(value)
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(part) for part in (key, *error["loc"]))
                problems.append(f"{where}: {error['msg']}")
        except Exception:  # noqa: BLE001, S112 - a type pydantic cannot build on its own
            continue
    return problems


def main() -> None:
    serve, llm_args = _imports()
    import click

    results = []
    for item in json.load(sys.stdin):
        problems = []
        try:
            serve.make_context("trtllm-serve", list(item["argv"]))
        except click.ClickException as exc:
            problems.append(exc.format_message())
        problems += _option_problems(llm_args.model_fields, item.get("options"))
        results.append("; ".join(problems) or None)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
