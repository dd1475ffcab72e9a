"""A POC's framework patches as a node's framework runs them, in any runtime, the framework on
the node left as it was shipped (an image's, a venv's).

The controller applies them (GNU patch, no fuzz, in order, all or nothing: the engine's dry
run) to a scratch copy of the files they touch, taken from the release the nodes run (its
source from the package index, :mod:`~pocforge.frameworks.patching.releases`), and gives each
of the framework's launches an overlay folder among its generated files, first on its
``PYTHONPATH``. Its ``sitecustomize`` (``_patched_site.py``, plain standard library) runs in
every process the launch starts (engine, workers) before anything else:

- it checks that each file the patches touch is the release's as published (SHA-256), or
  already patched in place; any other file (a vendor's build of it) stops the process with
  one line naming it, before the framework is imported: no half-patched framework runs;
- it imports the patched modules' code from the overlay (each keeps its installed
  ``__file__``), says once in the launch's log which patches are applied, and runs the
  ``sitecustomize`` it shadows (a profiler's gate, the image's own: ``site_files``).

Patching the installed files instead would change an image every POC on the node shares,
or a venv for every later run; the parity baseline is the same launch without the folder.
Only Python modules can be served this way: a patch that changes another file is refused
for nodes, naming it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.frameworks.patching import gnu_patch, releases
from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError, PatchFile, discover
from pocforge.frameworks.site_files import sitecustomize

# copied as the overlay's sitecustomize.py, never imported here
SITE = Path(__file__).with_name("_patched_site.py")
FOLDER = "pocforge-patched"  # under the launch's working directory
MAP_FILE = "pocforge_patched.json"


@dataclass(frozen=True)
class NodeOverlay:
    framework: str
    version: str
    patches: list[str]  # in the order applied: "vllm/0001-x.patch"
    files: dict[str, str] = field(default_factory=dict)  # the launch's generated files


def _module(path: str) -> str:
    """``vllm/entrypoints/x.py`` -> ``vllm.entrypoints.x``; a package's ``__init__.py`` -> it."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def node_overlay(spec, cache: Path) -> NodeOverlay | None:
    """The overlay that runs ``spec``'s patches of its serving framework on the nodes, made
    on the release ``serving.version`` names (fetched into ``cache`` once); None without
    patches. Raises :class:`PatchError` (one line, with the fix) when they cannot run there."""
    serving = spec.serving
    if serving is None or spec.source_dir is None or serving.framework not in FRAMEWORKS:
        return None
    framework, version = serving.framework, serving.version
    patches = discover(Path(spec.source_dir) / "patches", (framework,)).get(framework, [])
    if not patches:
        return None
    where = f"{spec.name}'s {framework} patches"
    if not version:
        raise PatchError(f"{where}: serving.version is not set; the nodes' release is not known")
    other = [p for p in patches if p.version != version]
    if other:
        raise PatchError(
            f"{where}: {', '.join(p.name for p in other)} made for {framework} "
            f"{other[0].version}, and the nodes run {version}: `pocforge patch rebase "
            f"{spec.name} --to {framework}=={version}`"
        )
    touched = list(dict.fromkeys(f for p in patches for f in p.files))
    other_files = [f for f in touched if not f.endswith(".py")]
    if other_files:
        raise PatchError(
            f"{where}: {', '.join(other_files)} is not a Python module, which a node's "
            "framework cannot be given without changing its installed files"
        )
    released = releases.source(framework, version, cache)
    modules = _apply(patches, touched, released, f"{framework} {version}")
    names = [p.name for p in patches]
    plan = {"framework": framework, "version": version, "package": FRAMEWORKS[framework][0]}
    plan |= {"patches": names, "modules": {}}
    files = {f"{FOLDER}/sitecustomize.py": sitecustomize(SITE)}
    for number, (path, (original, patched)) in enumerate(sorted(modules.items())):
        entry = {"path": path, "released": _sha(original), "patched": _sha(patched)}
        if patched is not None:
            entry["code"] = f"modules/{number:03d}.py"
            files[f"{FOLDER}/{entry['code']}"] = patched.decode()
        plan["modules"][_module(path)] = entry
    files[f"{FOLDER}/{MAP_FILE}"] = json.dumps(plan, indent=1, sort_keys=True)
    return NodeOverlay(framework, version, names, files)


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _apply(
    patches: list[PatchFile], touched: list[str], released: Path, release: str
) -> dict[str, tuple[bytes | None, bytes | None]]:
    """{file: (its bytes as released, as patched)}, None where absent: the patches applied in
    order to a scratch copy of the files they touch."""
    with tempfile.TemporaryDirectory(prefix="pocforge-patched-") as scratch:
        root = Path(scratch)
        for path in touched:
            if (released / path).is_file():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(released / path, root / path)
        for patch in patches:
            applied, output = gnu_patch.run(patch, root)
            if not applied:
                raise PatchError(
                    f"{patch.name}: does not apply to {release} as released "
                    f"({gnu_patch.failure(output)}): the nodes would run it unpatched"
                )
        return {
            path: (
                (released / path).read_bytes() if (released / path).is_file() else None,
                (root / path).read_bytes() if (root / path).is_file() else None,
            )
            for path in touched
        }
