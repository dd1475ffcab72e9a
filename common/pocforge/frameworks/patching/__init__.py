"""A POC's framework patches: ``pocs/<name>/patches/<framework>/NNNN-*.patch``, each pinned
to one exact framework version, checked, applied and reverted on the framework installed in
a target environment, all or nothing, with a record for the run's provenance.

- ``files`` parses and validates the patch files;
- ``target`` finds the installed framework through the target interpreter;
- ``engine`` holds the verbs (check, apply, revert, the provenance record) and their order;
- ``dry_run`` works out what the patches would do, replaying them in a scratch copy;
- ``gnu_patch`` runs GNU ``patch`` and reads its output;
- ``state`` is the record an apply leaves (``state.json``);
- ``backup`` writes the patched files, and the saved originals back on revert;
- ``lock`` keeps two appliers of one environment apart;
- ``report`` is what the verbs say, one status per patch.
"""

from pocforge.frameworks.patching.engine import (
    applied_patches,
    apply,
    check,
    revert,
    spec_problems,
)
from pocforge.frameworks.patching.files import (
    FRAMEWORKS,
    PatchError,
    PatchFile,
    discover,
    parse_patch,
)
from pocforge.frameworks.patching.report import PatchStatus, Report
from pocforge.frameworks.patching.state import AppliedPatch, PatchedFile
from pocforge.frameworks.patching.target import Installed, locate

__all__ = [
    "FRAMEWORKS",
    "AppliedPatch",
    "Installed",
    "PatchError",
    "PatchFile",
    "PatchStatus",
    "PatchedFile",
    "Report",
    "applied_patches",
    "apply",
    "check",
    "discover",
    "locate",
    "parse_patch",
    "revert",
    "spec_problems",
]
