"""A POC's framework patches as a node's framework runs them, in any runtime, the framework on
the node left as it was shipped (an image's, a venv's).

The controller applies them with the engine's dry run (GNU patch, no fuzz, in order, all or
nothing, on a scratch copy of the files they touch), taken from the release the nodes run (its
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

import json
from pathlib import Path

from pocforge.frameworks.patching import dry_run, releases
from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError, discover
from pocforge.frameworks.patching.state import digest
from pocforge.frameworks.patching.target import Installed
from pocforge.frameworks.site_files import sitecustomize

# copied as the overlay's sitecustomize.py, never imported here
SITE = Path(__file__).with_name("_patched_site.py")
FOLDER = "pocforge-patched"  # under the launch's working directory
MAP_FILE = "pocforge_patched.json"


def _module(path: str) -> str:
    """``vllm/entrypoints/x.py`` -> ``vllm.entrypoints.x``; a package's ``__init__.py`` -> it."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def node_overlay(spec, cache: Path) -> dict[str, str] | None:
    """The overlay that runs ``spec``'s patches of its serving framework on the nodes, as a
    launch's generated files, made on the release ``serving.version`` names (fetched into
    ``cache`` once) by the engine's dry run; None without patches. Raises
    :class:`PatchError` (one line, with the fix) when they cannot run there."""
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
    other_files = [f for p in patches for f in p.files if not f.endswith(".py")]
    if other_files:
        raise PatchError(
            f"{where}: {', '.join(other_files)} is not a Python module, which a node's "
            "framework cannot be given without changing its installed files"
        )
    root = releases.source(framework, version, cache)
    released = Installed(framework, f"{framework} as released", version, root, python="")
    dry = dry_run.plan(spec.name, framework, patches, released, None)
    refused = [one for one in dry.statuses if one.status not in ("applies", "applied")]
    if refused:
        raise PatchError(
            f"{refused[0].name}: {refused[0].status} on {framework} {version} as released "
            f"({refused[0].detail}): the nodes would run it unpatched"
        )
    plan = {"framework": framework, "version": version, "package": FRAMEWORKS[framework][0]}
    plan |= {"patches": [p.name for p in patches], "modules": {}}
    files = {f"{FOLDER}/sitecustomize.py": sitecustomize(SITE)}
    for number, path in enumerate(sorted(dry.before)):
        original, patched = dry.before[path], dry.after[path]
        entry = {"path": path, "released": digest(original), "patched": digest(patched)}
        if patched is not None:
            entry["code"] = f"modules/{number:03d}.py"
            files[f"{FOLDER}/{entry['code']}"] = patched.decode()
        plan["modules"][_module(path)] = entry
    files[f"{FOLDER}/{MAP_FILE}"] = json.dumps(plan, indent=1, sort_keys=True)
    return files
