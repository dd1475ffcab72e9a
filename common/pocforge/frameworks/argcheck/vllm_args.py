"""Check vLLM server arguments with vLLM's own parser and quick validation, then their
values with vLLM's own config classes that need no model (scheduler and cache: their
pydantic fields carry the ranges, e.g. ``max_num_seqs >= 1``,
``0 < gpu_memory_utilization <= 1``), which the parser alone accepts."""

import contextlib
import io
import json
import sys


class _ParseError(Exception):
    pass


def _config_values(args) -> None:
    """Raise ValueError naming each flag whose value vLLM's configs refuse."""
    import dataclasses

    from pydantic import ValidationError
    from vllm.config import CacheConfig, SchedulerConfig

    # the scheduler's init-only fields that come from the model: neutral stand-ins
    stand_ins = {"max_model_len": getattr(args, "max_model_len", None) or 8192}
    stand_ins["is_encoder_decoder"] = False
    problems = []
    for cls in (SchedulerConfig, CacheConfig):
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
        extra = stand_ins if cls is SchedulerConfig else {}
        try:
            cls(**{**extra, **given})
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                if field in given:
                    flag = "--" + field.replace("_", "-")
                    problems.append(f"{flag} {given[field]!r}: {error['msg']}")
        except (TypeError, ValueError):
            continue  # a config that cannot be built apart from the model: not judged here
    if problems:
        raise ValueError("; ".join(problems))


def main() -> None:
    # Where the node's vLLM keeps them: 0.3x's launchers package, or the OpenAI server's
    # module and vllm.utils in earlier releases (the 0.11 images), so the version the node
    # runs is the one that judges.
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser

    results = []
    for argv in json.load(sys.stdin):
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

        def error(message, _parser=parser):
            raise _ParseError(message)

        parser.error = error
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                args = parser.parse_args(argv)
                validate_parsed_serve_args(args)
                _config_values(args)
            results.append(None)
        except (_ParseError, ValueError, TypeError) as exc:
            results.append(str(exc))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
