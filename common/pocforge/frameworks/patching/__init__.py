"""A POC's framework patches: ``pocs/<name>/patches/<framework>/NNNN-*.patch``, each pinned
to one exact framework version, checked, applied and reverted on the framework installed in
a target environment, all or nothing, with a record for the run's provenance.

``files`` parses and validates the patch files, ``target`` finds the installed framework
through the target interpreter, ``engine`` does the dry run, the apply and the revert.
"""

from pocforge.frameworks.patching.engine import (
    AppliedPatch,
    PatchedFile,
    PatchStatus,
    Report,
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
