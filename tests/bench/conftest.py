"""Fixtures of the bench tests: a tiny tokenizer and the scripted streaming server."""

import pytest

from benchmarks.scripted_server import running_instrument
from pocforge.tiny_model.make import make_tiny

TTFT_MS, ITL_MS = 50.0, 10.0


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="module")
def instrument():
    """The scripted server (own process): first token after 50 ms, then one every 10 ms."""
    with running_instrument(TTFT_MS, ITL_MS) as url:
        yield url
