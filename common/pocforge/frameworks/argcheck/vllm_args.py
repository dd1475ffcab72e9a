"""Check vLLM server arguments with vLLM's own parser and quick validation."""

import contextlib
import io
import json
import sys


class _ParseError(Exception):
    pass


def main() -> None:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

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
            results.append(None)
        except (_ParseError, ValueError, TypeError) as exc:
            results.append(str(exc))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
