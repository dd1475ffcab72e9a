"""Shared test setup. Area-specific fixtures live in each folder's conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

# Kernels run under the Triton interpreter on this CPU machine; it must be set before any
# kernel module is imported, whichever test folder imports one first.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Two workers share this machine's two cores, and vLLM's CPU default pins every engine's
# worker to core 0 (core 1 reserved): two servers at once would share one core. Every
# server the tests start here (tests/servers.py's, a `pocforge run`'s) runs unpinned; a
# node's ranks are still pinned by the kit (one core each), and a node sees nothing of
# this environment.
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import pytest

from . import workers
from .workers import pytest_xdist_make_scheduler  # noqa: F401 (a hook: pytest finds it here)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO


class UnitGuardError(AssertionError):
    """A test without the ``process`` or ``integration`` marker started a process or used
    the network."""


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise UnitGuardError(
            f"a unit test may not {what}: mark it @pytest.mark.process (quick) or "
            "@pytest.mark.integration (real servers, hosts, browsers)"
        )

    return refuse


@pytest.fixture(autouse=True)
def _unit_guard(request, monkeypatch):
    """``make test-unit`` sets POCFORGE_UNIT_GUARD=1: then a test run as a unit test fails
    the moment it starts a process or connects or binds a socket, so the marker stays
    honest. Tests marked ``process`` or ``integration`` are not guarded."""
    if os.environ.get("POCFORGE_UNIT_GUARD") != "1":
        yield
        return
    marks = {m.name for m in request.node.iter_markers()}
    if not marks & {"process", "integration"}:
        import socket
        import subprocess

        monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("start a subprocess"))
        monkeypatch.setattr(os, "fork", _refuse("fork"))
        monkeypatch.setattr(os, "posix_spawn", _refuse("spawn a process"))
        monkeypatch.setattr(socket.socket, "connect", _refuse("connect a socket"))
        monkeypatch.setattr(socket.socket, "bind", _refuse("bind a socket"))
    yield


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    """The kit's tiny random Llama, built once per session (no hub)."""
    from pocforge.tiny_model.make import make_tiny

    return make_tiny(tmp_path_factory.mktemp("models") / "tiny-llama", arch="llama", seed=0)


@pytest.fixture(scope="session")
def tiny_moe(tmp_path_factory) -> Path:
    """The kit's tiny random Qwen3-MoE, built once per session (no hub)."""
    from pocforge.tiny_model.make import make_tiny

    return make_tiny(tmp_path_factory.mktemp("models") / "tiny-qwen-moe", arch="qwen-moe", seed=0)


# DeepSpeed's ZeRO stages the suite trains, once each per session (2 gloo ranks, the demo's
# layout): every training assertion reads these runs.
ZERO_STAGES = (2, 3)
ZERO_STEPS = 8


@pytest.fixture(scope="session")
def zero_runs(tiny_llama, tmp_path_factory) -> dict:
    """Real DeepSpeed on the tiny Llama at ZeRO-2 and ZeRO-3, 2 gloo ranks, started as
    ``pocforge run`` starts it: {stage: (TrainingSummary, its output folder)}."""
    import yaml

    from pocforge.frameworks import LaunchContext
    from pocforge.frameworks.process import free_port
    from pocforge.spec import load_spec
    from pocforge.training.run import run_training

    runs = {}
    for stage in ZERO_STAGES:
        spec = {
            "poc": {"name": f"zero{stage}", "customer": "pocforge tests", "owner": "tests"},
            "model": {"id": str(tiny_llama), "dtype": "float32"},
            "cluster": {"gpu": "cpu", "gpus_per_node": 1},
            "training": {
                "framework": "deepspeed",
                "zero_stage": stage,
                "dtype": "float32",
                "world_size": 2,
                "micro_batch": 2,
                "seq_len": 32,
                "steps": ZERO_STEPS,
                "warmup_steps": 2,
                "lr": 3e-3,
            },
        }
        folder = tmp_path_factory.mktemp("zero") / f"zero{stage}"  # the POC's name
        folder.mkdir()
        (folder / "poc.yaml").write_text(yaml.safe_dump(spec))
        ctx = LaunchContext.local(REPO, port=free_port())
        # both runs within the budget of the first test that asks (300 s): about 9 s each here
        summary = run_training(load_spec(folder / "poc.yaml"), folder / "out", ctx, timeout_s=120)
        runs[stage] = (summary, folder / "out")
    return runs


@pytest.fixture(scope="session")
def sglang_llama(tiny_llama, tmp_path_factory):
    """One plain SGLang CPU server on the tiny Llama for the session (``tests/servers.py``):
    the adapter's own tests and the plugin tests' reference query the same one."""
    from .servers import SGLANG_ENGINE_ARGS, shared_server  # the kit's adapters: heavy

    yield from shared_server(
        "sglang",
        tmp_path_factory.mktemp("sglang"),
        tiny_llama,
        engine_args=SGLANG_ENGINE_ARGS,
    )


def pytest_configure(config):
    workers.configure(config)
    config.addinivalue_line(
        "markers",
        "ends_shared_server(fixture): kills the session's server of that fixture; runs "
        "right after the last other test that uses it",
    )
    config.addinivalue_line(
        "markers",
        "shares(resource): the file's tests use a resource of this machine that one test at "
        "a time may (the namespaced subnet, podman's containers): one pytest-xdist worker "
        "runs every test that shares it",
    )
    config.addinivalue_line(
        "markers",
        "budget(seconds, why): this test (its fixtures' setup included) may run so long "
        "before it fails, instead of pyproject's default; why says what takes the time",
    )


def _budget(item) -> None:
    """A ``budget`` mark becomes pytest-timeout's limit for the test. The default limit is
    a few minutes (pyproject.toml), so a hang fails fast; a test that needs longer says
    how long and why, and a bare ``timeout`` mark, which says neither, is refused."""
    if item.get_closest_marker("timeout"):
        raise pytest.UsageError(
            f"{item.nodeid}: use @pytest.mark.budget(seconds, why) (what takes the time), "
            "not a bare timeout mark"
        )
    mark = item.get_closest_marker("budget")
    if mark is None:
        return
    seconds, why = (*mark.args, mark.kwargs.get("why", ""))[:2]
    if not (isinstance(seconds, int | float) and seconds > 0 and isinstance(why, str) and why):
        raise pytest.UsageError(
            f"{item.nodeid}: budget needs seconds > 0 and why, e.g. "
            '@pytest.mark.budget(600, "two vLLM starts")'
        )
    item.add_marker(pytest.mark.timeout(seconds))


def pytest_unconfigure(config):
    workers.unconfigure(config)


def pytest_collection_modifyitems(config, items):
    """Limits from ``budget`` marks; which worker runs which test (``tests/workers.py``);
    and a test that ends a shared server (a SIGKILL, to check crash handling) moves to just
    after the last other selected test using that server's fixture, so every user finds
    the server up and it stops as soon as no one needs it."""
    for item in items:
        _budget(item)
    workers.assign(config, items)
    for item in [i for i in items if i.get_closest_marker("ends_shared_server")]:
        (fixture,) = item.get_closest_marker("ends_shared_server").args
        users = [
            n
            for n, other in enumerate(items)
            if other is not item and fixture in getattr(other, "fixturenames", ())
        ]
        if users and users[-1] > items.index(item):
            items.remove(item)
            items.insert(users[-1], item)  # the last user moved up by one: right after it


def pytest_terminal_summary(terminalreporter) -> None:
    """After ``--durations``: the time of each file (setup, call and teardown of its tests,
    a module fixture's setup in its first test) and the sum, slowest first, so a change's
    cost to the suite shows where it landed."""
    per_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            duration = getattr(report, "duration", None)
            nodeid = getattr(report, "nodeid", "")
            if duration is None or not nodeid or getattr(report, "when", None) is None:
                continue
            path = nodeid.split("::", 1)[0]
            per_file[path] = per_file.get(path, 0.0) + duration
    if len(per_file) < 2:
        return
    ranked = sorted(per_file.items(), key=lambda kv: kv[1], reverse=True)
    write = terminalreporter.write_line
    terminalreporter.section("time per file (slowest 25; setup + call + teardown)")
    for path, seconds in ranked[:25]:
        write(f"{seconds:8.1f}s  {path}")
    total = sum(per_file.values())
    write(f"{total:8.1f}s  all {len(per_file)} files ({total / 60:.1f} min)")
