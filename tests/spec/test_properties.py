"""Property: any mutation of a valid spec gives a valid spec or a clean SpecError, never
another exception (the CLI's promise of no tracebacks rests on this)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocforge.spec import SpecError, load_spec

from ..conftest import REPO

BASES = [
    yaml.safe_load((REPO / "pocs" / name / "poc.yaml").read_text())
    for name in ("demo", "deepseek-v3-fp8-mi355x-sglang", "llama-3-8b-bf16-mi300x-deepspeed")
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        ["vllm", "sglang", "cpu", "MI300X", "${HOME}", "random", "p99", "<= 5", "../x"]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths(value, (*prefix, index))
    return found


def mutate(data: Any, path: tuple, action: str, value: Any) -> Any:
    if not path:
        return value if action == "replace" else data
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[f"{last}_extra"] = value
    return data


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_specs_validate_or_fail_cleanly(tmp_path_factory, data):
    base = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths(base)))
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        base = mutate(base, path, action, data.draw(values))
    folder = tmp_path_factory.mktemp("spec") / str(BASES[0]["poc"]["name"])
    folder.mkdir()
    file = folder / "poc.yaml"
    file.write_text(yaml.safe_dump(base, allow_unicode=True))
    try:
        load_spec(file)
    except SpecError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300), cut=st.integers(0, 2000))
def test_garbled_yaml_fails_cleanly(tmp_path_factory, text, cut):
    original = (REPO / "pocs" / "demo" / "poc.yaml").read_text()
    folder = tmp_path_factory.mktemp("spec") / "demo"
    folder.mkdir()
    file = folder / "poc.yaml"
    file.write_text(original[:cut] + text + original[cut:])
    try:
        load_spec(file)
    except SpecError as exc:
        assert exc.problems
