"""Check SGLang server arguments with SGLang's own ``prepare_server_args``."""

import contextlib
import io
import json
import sys


class _ParseError(Exception):
    pass


def main() -> None:
    import argparse

    from sglang.srt.server_args import prepare_server_args

    original_error = argparse.ArgumentParser.error

    def error(self, message):
        raise _ParseError(message)

    argparse.ArgumentParser.error = error
    results = []
    try:
        for argv in json.load(sys.stdin):
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    prepare_server_args(argv)
                results.append(None)
            except (_ParseError, ValueError, TypeError, AssertionError) as exc:
                results.append(str(exc) or type(exc).__name__)
    finally:
        argparse.ArgumentParser.error = original_error
    print(json.dumps(results))


if __name__ == "__main__":
    main()
