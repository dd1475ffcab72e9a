"""The run store: atomic files, a manifest updated last, stage status, secrets kept out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.results.store import Run, RunError, RunStore
from pocforge.results.verify import verify
from pocforge.spec import load_poc, load_spec

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


def test_create_writes_manifest_and_provenance(store: RunStore) -> None:
    """A new run has run.json (spec, hash, kit sha) and provenance.json, both checksummed."""
    spec = load_poc("demo")
    run = store.create(spec)
    m = Run.open(run.path).manifest
    assert m.poc == "demo" and m.status == "running" and m.spec_hash == spec.spec_hash
    assert m.spec["poc"]["name"] == "demo" and m.kit.version
    assert "provenance.json" in m.files and m.files["provenance.json"].sha256
    facts = run.provenance().hosts[0]
    assert facts.kernel and facts.cpu_count and "pocforge" in facts.packages


def test_stage_statuses(store: RunStore) -> None:
    """complete on exit, failed (with the error) on an exception, interrupted on ^C."""
    run = store.create(load_poc("demo"), provenance=False)
    with run.stage("a") as st:
        st.write_json("x.json", {"v": 1})
        st.append_jsonl("rows.jsonl", [{"i": 1}, {"i": 2}])
    with pytest.raises(ValueError), run.stage("b"):
        raise ValueError("boom")
    with pytest.raises(KeyboardInterrupt), run.stage("c"):
        raise KeyboardInterrupt
    run.finish()
    m = Run.open(run.path).manifest
    assert [m.stages[s].status for s in "abc"] == ["complete", "failed", "interrupted"]
    assert m.stages["b"].error == "ValueError: boom"
    assert m.stages["a"].files == ["a/x.json", "a/rows.jsonl"]
    assert not m.files["a/rows.jsonl"].open and m.status == "interrupted"
    assert verify(run.path).ok


def test_tool_written_files_are_adopted(store: RunStore) -> None:
    """Files a tool writes itself into the stage folder enter the manifest at stage end."""
    run = store.create(None, poc="p", provenance=False)
    with run.stage("serving") as st:
        (st.dir / "chat").mkdir()
        (st.dir / "chat" / "summary.json").write_text("{}")
        (st.dir / "chat" / ".half.json.tmp-1").write_text("{")  # an interrupted atomic write
    assert "serving/chat/summary.json" in Run.open(run.path).manifest.files
    report = verify(run.path)
    assert report.ok and any("temporary" in line for line in report.incomplete)


def test_paths_must_stay_inside(store: RunStore) -> None:
    run = store.create(None, poc="p", provenance=False)
    for bad in ("../x.json", "/etc/x", "run.json"):
        with pytest.raises(RunError):
            run.write_text(bad, "x")


def test_resolve(store: RunStore) -> None:
    a = store.create(None, poc="p", run_id="20260101-000000-000-00001", provenance=False)
    b = store.create(None, poc="p", run_id="20260102-000000-000-00001", provenance=False)
    assert store.resolve("p") == b.path and store.resolve("p/" + a.manifest.run_id) == a.path
    with pytest.raises(RunError, match="no run"):
        store.resolve("p/nope")


CANARY_TOKEN = "hf_CANARYtoken0123456789abcdef"
CANARY_PASSWORD = "canary-Pa55w0rd-xyz"
CANARY_ENV = "sk-canary-api-key-987654"


def test_secrets_never_reach_the_run_or_dashboard(tmp_path: Path, monkeypatch, repo: Path) -> None:
    """Canary secrets in the spec (hf_token, ssh password) and the environment appear in no
    file of the run folder nor in the dashboard, whatever path they come in by."""
    from pocforge.report import render

    monkeypatch.setenv("HF_TOKEN", CANARY_TOKEN)
    monkeypatch.setenv("SSH_PW", CANARY_PASSWORD)
    monkeypatch.setenv("VLLM_API_KEY", CANARY_ENV)
    folder = tmp_path / "pocs" / "demo"
    folder.mkdir(parents=True)
    text = (repo / "pocs" / "demo" / "poc.yaml").read_text()
    text = text.replace(
        "  tiny: {arch: llama, seed: 0}", "  tiny: {arch: llama, seed: 0}\n  hf_token: ${HF_TOKEN}"
    )
    text = text.replace("  gpus_per_node: 1", "  gpus_per_node: 1\n  ssh: {password: '${SSH_PW}'}")
    (folder / "poc.yaml").write_text(text)
    spec = load_spec(folder / "poc.yaml")
    assert spec.model.hf_token.get_secret_value() == CANARY_TOKEN

    run = RunStore(tmp_path / "results").create(spec)
    with run.stage("serving") as st:
        st.write_json("echo.json", {"token": CANARY_TOKEN, "argv": f"--password {CANARY_PASSWORD}"})
        st.append_jsonl("log.jsonl", [{"line": f"Authorization: Bearer {CANARY_ENV}"}])
        log = tmp_path / "server.log"
        log.write_text(f"started with HF_TOKEN={CANARY_TOKEN}\n")
        st.add_file(log)
        (st.dir / "tool.txt").write_text(f"tool wrote {CANARY_PASSWORD}\n")  # adopted at stage end
    with pytest.raises(RuntimeError), run.stage("failing"):
        raise RuntimeError(f"could not log in with {CANARY_TOKEN}")
    run.finish()
    html = render(run.path)

    leaked = []
    for file in [*run.path.rglob("*"), html]:
        if file.is_file():
            data = file.read_bytes()
            leaked += [
                f"{file.name}: {c}"
                for c in (CANARY_TOKEN, CANARY_PASSWORD, CANARY_ENV)
                if c.encode() in data
            ]
    assert not leaked
    assert "HF_TOKEN" in json.loads((run.path / "provenance.json").read_text())["hosts"][0]["env"]
    assert verify(run.path).ok
