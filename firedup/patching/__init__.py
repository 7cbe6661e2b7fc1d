"""Patch lifecycle for installed packages: check, apply all-or-nothing, revert.

Patches are data (`patches/<package>/<name>/manifest.yaml` + a unified diff); see
docs/patches.md. The entry point is `sync_patches`.
"""

from firedup.patching.record import Actor
from firedup.patching.report import Mode, PatchOutcome, PatchReport, PatchStatus
from firedup.patching.sync import sync_patches

__all__ = ["Actor", "Mode", "PatchOutcome", "PatchReport", "PatchStatus", "sync_patches"]
