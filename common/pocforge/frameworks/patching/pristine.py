"""The framework as it was before a POC's patches, for a process of its own (the parity
stage's baseline), without touching the patched environment.

``overlay`` writes a folder to put first on that process's ``PYTHONPATH``: a
``sitecustomize`` (``_pristine_site.py``) that imports each patched module's code from the
original ``apply`` saved (:mod:`~pocforge.frameworks.patching.backup`), and treats a module
the patches added as absent. Reverting and re-applying around the baseline would do the
same, but a kill in between would leave the environment silently unpatched for the next
run; this leaves nothing to put back.

Only Python modules can be restored this way: a patched data or extension file stays
patched in the baseline, and ``Overlay.unrestored`` names it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pocforge import atomic
from pocforge.frameworks.patching import state
from pocforge.frameworks.patching.backup import BACKUP_DIR
from pocforge.frameworks.patching.files import PatchError
from pocforge.frameworks.patching.target import locate

# copied as the overlay's sitecustomize.py, never imported here
SITE = Path(__file__).with_name("_pristine_site.py")
MAP_FILE = "pocforge_pristine.json"


@dataclass
class Overlay:
    folder: Path
    patches: list[str]  # the patches the baseline runs without
    modules: list[str]  # the modules imported from their originals
    unrestored: list[str] = field(default_factory=list)  # patched files it cannot restore

    def note(self) -> str:
        text = (
            f"the baseline ran the framework unpatched: {len(self.modules)} module(s) of "
            f"{len(self.patches)} patch(es) ({', '.join(self.patches)}) imported from the "
            "originals saved at apply"
        )
        if self.unrestored:
            text += f"; still patched in the baseline (not Python modules): {', '.join(self.unrestored)}"
        return text


def overlay(poc: str, framework: str, python: str, folder: Path) -> Overlay | None:
    """The overlay for ``poc``'s patches of ``framework`` as ``python`` sees it, written
    to ``folder``; None when none of them is applied there."""
    installed = locate(framework, python)
    record = state.load(installed.root, poc, framework) if installed else None
    if installed is None or record is None:
        return None
    if not record.complete:
        raise PatchError(
            f"{poc}'s {framework} patches were being applied when something stopped it; "
            f"run `pocforge patch revert {poc}` then `pocforge patch apply {poc}`"
        )
    saved = state.folder(installed.root, poc, framework) / BACKUP_DIR
    modules: dict[str, dict | None] = {}
    unrestored = []
    for file in record.files:
        if not file.path.endswith(".py"):
            unrestored.append(file.path)
            continue
        name = file.path[: -len(".py")].replace("/", ".")
        package = name.endswith(".__init__")
        name = name.removesuffix(".__init__")
        if file.before_sha256 is None:
            modules[name] = None
            continue
        original = saved / file.path
        if state.digest(state.contents(original)) != file.before_sha256:
            raise PatchError(f"{original}: the saved original is missing or damaged")
        modules[name] = {
            "installed": str(installed.root / file.path),
            "original": str(original),
            "package": package,
        }
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copyfile(SITE, folder / "sitecustomize.py")
    atomic.write_text(folder / MAP_FILE, json.dumps({"modules": modules}, indent=2))
    return Overlay(
        folder=folder,
        patches=[p.name for p in record.patches],
        modules=sorted(modules),
        unrestored=unrestored,
    )
