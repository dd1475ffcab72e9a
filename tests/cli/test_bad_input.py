"""Bad input on every ``pocforge`` verb: an unknown option, a POC or run that does not
exist, a spec file that is not a spec, importer inputs that are truncated, binary, of the
wrong schema or huge. Each ends with exit status 2 (usage, a spec error) or 1 (a failed
check), a message that names what was wrong, and never a traceback.

The verbs are found by walking the command tree, so a verb added later is covered without
a line here. Run in-process (click's runner): no server, no subprocess per case."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocforge.cli import main
from pocforge.results.importers import FORMATS


def leaves(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += leaves(command, (*path, name))
        else:
            out.append(((*path, name), command))
    return out


VERBS = leaves(main)
# verbs whose first argument is a POC (a name under pocs/ or a poc.yaml path)
POC_VERBS = [
    path for path, command in VERBS if any(p.name in ("poc", "target") for p in command.params)
]
RUN_VERBS = [path for path, command in VERBS if any(p.name == "run" for p in command.params)]


def invoke(tmp_path, monkeypatch, *args: str):
    monkeypatch.chdir(tmp_path)  # a workspace of its own: nothing lands in the checkout
    result = CliRunner().invoke(main, list(args), catch_exceptions=True, prog_name="pocforge")
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"pocforge {' '.join(args)} raised {result.exception!r:.300}"
    assert "Traceback" not in text, text
    return result.exit_code, text


def test_every_verb_is_found():
    names = {" ".join(path) for path, _ in VERBS}
    assert {
        "run",
        "validate",
        "launch",
        "report",
        "import",
        "results verify",
        "cluster up",
    } <= names
    assert len(POC_VERBS) >= 10 and RUN_VERBS


@pytest.mark.parametrize("path", [p for p, _ in VERBS], ids=" ".join)
def test_an_unknown_option_is_a_usage_error(path, tmp_path, monkeypatch):
    code, text = invoke(tmp_path, monkeypatch, *path, "--no-such-option")
    assert code == 2 and "No such option" in text and "--no-such-option" in text


@pytest.mark.parametrize("path", POC_VERBS, ids=" ".join)
def test_a_poc_that_does_not_exist_is_named(path, tmp_path, monkeypatch):
    code, text = invoke(tmp_path, monkeypatch, *path, "no-such-poc")
    assert code in (1, 2) and "no-such-poc" in text, text


@pytest.mark.parametrize("path", POC_VERBS, ids=" ".join)
@pytest.mark.parametrize(
    "payload", [b"", b"\x00\xff\xfe\x00", b"poc: [unclosed", b"- a\n- b\n", b"poc: {name: x}\n"]
)
def test_a_spec_that_is_not_one_is_located(path, payload, tmp_path, monkeypatch):
    bad = tmp_path / "x" / "poc.yaml"
    bad.parent.mkdir()
    bad.write_bytes(payload)
    code, text = invoke(tmp_path, monkeypatch, *path, str(bad))
    assert code in (1, 2) and "poc.yaml" in text, text


@pytest.mark.parametrize("path", RUN_VERBS, ids=" ".join)
def test_a_run_that_does_not_exist_is_named(path, tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    code, text = invoke(
        tmp_path,
        monkeypatch,
        *path,
        "demo/20990101-000000-000-00000",
        "--root",
        str(tmp_path / "results"),
    )
    assert code in (1, 2) and "20990101-000000-000-00000" in text, text


def test_a_results_folder_of_someone_elses_is_refused(tmp_path, monkeypatch):
    """A folder that holds files but no run manifest: verify says so, for the run it names."""
    run = tmp_path / "results" / "demo" / "20260101-000000-000-00001"
    run.mkdir(parents=True)
    (run / "notes.txt").write_text("not ours\n")
    code, text = invoke(
        tmp_path,
        monkeypatch,
        "results",
        "verify",
        "demo/" + run.name,
        "--root",
        str(tmp_path / "results"),
    )
    assert code in (1, 2) and run.name in text, text


def import_file(tmp_path, monkeypatch, path, fmt: str):
    """``pocforge import PATH --format FMT`` into a results folder of the test's own."""
    root = str(tmp_path / "results")
    return invoke(tmp_path, monkeypatch, "import", str(path), "--format", fmt, "--root", root)


FILES = st.one_of(
    st.binary(max_size=2048),
    st.text(max_size=2048).map(str.encode),
    st.sampled_from([b"{", b'{"points": 3}', b"[]", b"null", b'{"results": {"a": {"b": ']),
)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=FILES)
def test_an_importer_refuses_what_it_cannot_read(fmt, content, tmp_path, monkeypatch):
    """Truncated, binary, wrong-schema or random bytes for each format: a clean refusal
    (or, for a file that happens to parse, a clean import), never a traceback."""
    bad = tmp_path / f"in-{fmt}.txt"
    bad.write_bytes(content)
    code, text = import_file(tmp_path, monkeypatch, bad, fmt)
    assert code in (0, 1, 2), text
    if code:
        assert bad.name in text or fmt in text, text


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_importer_refuses_a_huge_file_of_junk(fmt, tmp_path, monkeypatch):
    bad = tmp_path / "huge.txt"
    bad.write_bytes(b"x" * 1000 + (b"\xff" * 64 + b"\n") * 150_000)  # about 10 MB
    code, text = import_file(tmp_path, monkeypatch, bad, fmt)
    assert code in (1, 2) and ("huge.txt" in text or fmt in text), text
