"""A framework release's source as its package index serves it: fetched once, checked
against the index's SHA-256, unpacked and read, never imported or installed.

The index is asked through its JSON API (PEP 691; ``versions`` per PEP 700), with the
standard library's HTTP client: two plain GETs, no session or retries to keep. The sdist is
preferred (vLLM, DeepSpeed); where a release ships wheels only (SGLang), a wheel holds the
same Python files. Only the framework's package is unpacked: a patch's paths are
``<package>/...``, and an sdist's C++ and CUDA sources are not what a patch touches.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError
from pocforge.paths import workspace_root

INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 120
# the framework's distribution on the index (its CPU builds are another distribution)
DISTRIBUTIONS = {"vllm": "vllm", "sglang": "sglang", "deepspeed": "deepspeed"}


def cache() -> Path:
    """Where the kit keeps the releases it fetched (``source`` unpacks each there once)."""
    return workspace_root() / ".artifacts" / "releases"


class ReleaseError(PatchError):
    """The index has no such release, or did not answer (one line, with the fix)."""


@functools.cache  # one answer per run: `latest` and the release's files ask it both
def _index(framework: str) -> dict:
    if framework not in DISTRIBUTIONS:
        raise ReleaseError(
            f"--against {framework}: no release source for it (known: {', '.join(DISTRIBUTIONS)})"
        )
    url = f"{INDEX}/{DISTRIBUTIONS[framework]}/"
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ReleaseError(f"{url}: the package index did not answer ({exc})") from None


def latest(framework: str) -> str:
    """The newest final release of ``framework`` on the index."""
    finals = []
    for raw in _index(framework).get("versions", []):
        try:
            version = Version(raw)
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease:
            finals.append((version, raw))
    if not finals:
        raise ReleaseError(f"the package index lists no final release of {framework}")
    return max(finals)[1]


def _pick(framework: str, version: str) -> dict:
    """The release's sdist, else its wheel for CPython 3.11 on x86-64, else a pure-Python
    wheel, else any of its wheels."""
    dist = DISTRIBUTIONS[framework]
    files = [f for f in _index(framework)["files"] if not f.get("yanked")]
    wheels = [
        f
        for f in files
        if f["filename"].endswith(".whl")
        and f["filename"].split("-")[:2] == [dist.replace("-", "_"), version]
    ]
    ranked = [
        *(f for f in files if f["filename"] == f"{dist}-{version}.tar.gz"),
        *(f for f in wheels if "cp311" in f["filename"] and "x86_64" in f["filename"]),
        *(f for f in wheels if "py3-none-any" in f["filename"]),
        *wheels,
    ]
    if not ranked:
        raise ReleaseError(
            f"{framework}=={version}: the package index has no such release "
            f"(`pip index versions {dist}` lists them; --against {framework}==<one of them>)"
        )
    return ranked[0]


def _unpack(data: bytes, name: str, package: str, into: Path) -> str:
    """The release's ``package`` folder unpacked under ``into``; the folder that holds it,
    relative to ``into``."""
    if name.endswith(".tar.gz"):
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            root = name[: -len(".tar.gz")]
            wanted = [m for m in archive.getmembers() if m.name.startswith(f"{root}/{package}/")]
            archive.extractall(into, members=wanted, filter="data")
        return root
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(
            into, members=[n for n in archive.namelist() if n.startswith(f"{package}/")]
        )
    return "."


def source(framework: str, version: str, cache: Path) -> Path:
    """The folder holding ``framework``'s package as released in ``version`` (the folder a
    patch's ``a/<package>/...`` paths are relative to), fetched into ``cache`` once. It is
    unpacked aside and renamed into place whole, so two callers at once (test workers) and
    an interrupted unpack leave no half of it."""
    package = FRAMEWORKS[framework][0]
    into = cache / f"{framework}-{version}"
    if not (into / ".holder").is_file():
        chosen = _pick(framework, version)
        try:
            with urllib.request.urlopen(chosen["url"], timeout=TIMEOUT_S) as answer:
                data = answer.read()
        except (urllib.error.URLError, OSError) as exc:
            raise ReleaseError(f"{chosen['url']}: not fetched ({exc})") from None
        want = chosen.get("hashes", {}).get("sha256")
        if want and hashlib.sha256(data).hexdigest() != want:
            raise ReleaseError(f"{chosen['filename']}: its SHA-256 is not the index's; not used")
        cache.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=cache, prefix=f".{into.name}."))
        try:
            holder = _unpack(data, chosen["filename"], package, partial)
            if not (partial / holder / package).is_dir():
                raise ReleaseError(f"{chosen['filename']}: no {package}/ package in it")
            (partial / ".holder").write_text(holder)
            with contextlib.suppress(OSError):  # another caller put it there first
                partial.rename(into)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return (into / (into / ".holder").read_text()).resolve()
