"""Bad specs give every problem at once as ``file:LINE: field.path: message``, never a traceback."""

from __future__ import annotations

import re

import pytest

from pocforge.spec import SpecError


def problems(load, data) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(data)
    return [str(p) for p in info.value.problems]


def test_good_spec_loads(load, good):
    """The fixture itself is valid, so every failure below is caused by its one mutation."""
    spec = load(good)
    assert spec.serving.parallelism.tp == 8
    assert len(spec.spec_hash) == 64


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["serving"]["parallelism"].update(tpp=2),
            r"serving\.parallelism\.tpp: unknown field 'tpp'; did you mean 'tp'\?",
        ),
        (
            lambda d: d["serving"].update(framework="vlm"),
            r"serving\.framework: 'vlm' is not allowed; did you mean 'vllm'\? "
            r"\(allowed: vllm, sglang, trtllm\)",
        ),
        (
            lambda d: d["cluster"].update(gpu="MI301X"),
            r"cluster\.gpu: unknown GPU type 'MI301X' \(allowed: MI300X, .*cpu\)",
        ),
        (
            lambda d: d["cluster"].update(nodes=0),
            r"cluster\.nodes: input should be greater than or equal to 1 \(got 0\)",
        ),
        (
            lambda d: d["cluster"].update(nodes="two"),
            r"cluster\.nodes: input should be a valid integer.*\(got 'two'\)",
        ),
        (lambda d: d["poc"].pop("customer"), r"poc\.customer: required field is missing"),
        (
            lambda d: d["serving"]["workloads"][0]["dataset"].update(kind="randm"),
            r"dataset: kind 'randm' is not known; did you mean 'random'\?",
        ),
        (
            lambda d: d["serving"]["workloads"][0]["dataset"].pop("isl"),
            r"serving\.workloads\.0\.dataset\.isl: required field is missing",
        ),
        (
            lambda d: d["serving"]["workloads"][0]["load"].update(request_rate=[2.0]),
            r"load: give exactly one of concurrency \(closed loop\) or request_rate",
        ),
        (
            lambda d: d["serving"]["workloads"][0]["dataset"].update(
                isl={"distribution": "uniform", "mean": 10}
            ),
            r"isl: a uniform distribution needs min and max",
        ),
        (
            lambda d: d["acceptance"].update(criteria=["ttft is small"]),
            r"cannot read criterion 'ttft is small'",
        ),
        (
            lambda d: d.update(servng={}),
            r": servng: unknown field 'servng'; did you mean 'serving'\?",
        ),
        (lambda d: d.update(poc=3), r"poc: should be a mapping of fields \(got 3\)"),
    ],
)
def test_one_bad_field_is_named_with_its_line(load, good, mutate, expected):
    mutate(good)
    found = problems(load, good)
    assert any(re.search(expected, p) for p in found), found
    assert all(re.match(r".*poc\.yaml(:\d+)?: ", p) for p in found), found


def test_every_problem_is_reported_at_once(load, good):
    good["serving"]["parallelism"]["tpp"] = 2
    good["cluster"]["gpu"] = "A100"
    good["poc"]["owner"] = ""
    found = problems(load, good)
    assert len(found) == 3, found


def test_line_numbers_point_at_the_key(load):
    text = (
        "poc: {name: good, customer: c, owner: o}\n"
        "model: {id: x/y}\n"
        "cluster:\n"
        "  gpu: MI300X\n"
        "  gpus_per_nod: 8\n"
    )
    (found,) = problems(load, text)
    assert re.search(r"good/poc\.yaml:5: cluster\.gpus_per_nod: unknown field", found), found


def test_poc_name_must_equal_folder(load, good):
    found = problems(lambda d: load(d, folder="other-name"), good)
    assert any("poc.name: 'good' must equal the folder name 'other-name'" in p for p in found), (
        found
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "file is empty"),
        ("# only a comment\n", "file is empty"),
        ("poc: [\n", "not valid YAML"),
        ("- a\n- b\n", "the top level must be a mapping"),
        ("just a string\n", "the top level must be a mapping"),
        ("a: 1\n---\nb: 2\n", "holds several YAML documents"),
        ("a: 1\na: 2\n", "a: duplicate key (first set on line 1)"),
        ("<<: {a: 1}\n", "YAML merge keys (<<) are not supported"),
        ("? [a, b]\n: 1\n", "keys must be plain strings"),
        (
            "a: !!python/object:os.system 1\n",
            "a: cannot read value: could not determine a constructor",
        ),
        ("a: !!int abc\n", "a: cannot read value"),
        ("a: " + "[" * 200 + "]" * 200 + "\n", "nested"),
        ("a: !!timestamp nope\n", "a: cannot read value"),
    ],
)
def test_unreadable_files_are_clean_errors(load, text, expected):
    found = problems(load, text)
    assert any(expected in p for p in found), found


def test_yaml_bomb_hits_the_budget_not_the_memory(load):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    found = problems(load, "\n".join(lines) + "\n")
    assert any("YAML bomb" in p for p in found), found


def test_binary_file_is_a_clean_error(write):
    path = write("x")
    path.write_bytes(b"\xff\xfe\x00bad")
    from pocforge.spec import load_spec

    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_spec(path)


def test_missing_file_and_folder(tmp_path):
    from pocforge.spec import load_spec

    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nope" / "poc.yaml")
    with pytest.raises(SpecError, match="is a folder"):
        load_spec(tmp_path)
