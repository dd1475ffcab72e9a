"""A node's launches start in tiers: a disaggregated deployment's prefill and decode instances
load together (on GPUs each loads its weights for minutes), and the router starts only once
every one of them is healthy. Real processes: each instance a small HTTP server that takes
``LOAD_S`` to come up."""

from __future__ import annotations

import sys
import time

import pytest

from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.node_launcher import start_node, tiers
from pocforge.frameworks.process import ServerCrashed, free_port

pytestmark = pytest.mark.process

LOAD_S = 2.0
INSTANCE = """
import functools, http.server, pathlib, sys, time
time.sleep(float(sys.argv[2]))  # loading its weights
if sys.argv[3] == "dies":
    sys.exit(3)
pathlib.Path(f"up-{sys.argv[1]}").write_text(repr(time.time()))
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=".")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


def instance(role: str, n: int | None, port: int, fate: str = "lives", load_s=LOAD_S):
    return NodeLaunch(
        "serving",
        "vllm",
        0,
        "127.0.0.1",
        role,
        [sys.executable, "-c", INSTANCE, str(port), str(load_s), fate],
        files={"health": "ok\n"},
        health_url=f"http://127.0.0.1:{port}/health",
        instance=n,
    )


def stop_all(started) -> None:
    for process in reversed(started):
        process.stop(grace_s=2.0)


def test_prefill_and_decode_load_together_and_the_router_waits_for_both(tmp_path):
    base = free_port()
    launches = [
        instance("prefill", 0, base + 1),
        instance("decode", 0, base + 2),
        instance("decode", 1, base + 3),
        instance("router", None, base, load_s=0),
    ]
    assert [[one.role for one in tier] for tier in tiers(launches)] == [
        ["prefill", "decode", "decode"],
        ["router"],
    ]
    started = []
    began = time.monotonic()
    try:
        start_node("pd", launches, 0, 60, lambda _: None, started, tmp_path)
        took = time.monotonic() - began
    finally:
        stop_all(started)
    up = {port: float((tmp_path / f"up-{port}").read_text()) for port in range(base, base + 4)}
    # one after another would be 3 loads; together they are one (and the polls' interval)
    assert took < 3 * LOAD_S, took
    assert up[base] >= max(up[base + 1], up[base + 2], up[base + 3])


def test_an_instance_that_dies_while_another_loads_ends_the_start_naming_it(tmp_path):
    base = free_port()
    launches = [
        instance("prefill", 0, base + 1, load_s=30),  # still loading when decode dies
        instance("decode", 0, base + 2, fate="dies", load_s=0.5),
        instance("router", None, base, load_s=0),
    ]
    started = []
    began = time.monotonic()
    try:
        with pytest.raises(ServerCrashed, match=r"^vllm decode0 exited with code 3"):
            start_node("pd", launches, 0, 60, lambda _: None, started, tmp_path)
    finally:
        stop_all(started)
    assert time.monotonic() - began < 20
    assert [p.launch.role for p in started] == ["prefill", "decode"]  # no router started


def test_other_roles_still_start_one_at_a_time():
    launches = [
        instance("headless", None, 1),
        instance("headless", None, 2),
        instance("server", None, 3),
    ]
    assert [len(tier) for tier in tiers(launches)] == [1, 1, 1]
