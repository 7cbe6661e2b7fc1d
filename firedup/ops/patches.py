"""`fab sync-patches` as an operation on a node: under its lock, and in its history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from firedup import __version__
from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import DeployError
from firedup.node.base import Node, operator
from firedup.node.lock import node_lock
from firedup.node.runtime import OciRuntime, runtime_for
from firedup.ops.containers import sync_image_patches
from firedup.ops.history import Action, HistoryRecord, Outcome, append_history
from firedup.ops.repo import inventory_commit
from firedup.patching.report import Mode, PatchReport, PatchStatus
from firedup.patching.sync import sync_patches


def sync_patches_recorded(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    *,
    mode: Mode,
    force_unlock: bool = False,
    on_progress: Callable[[str], None] = lambda _m: None,
) -> PatchReport:
    """Check (no lock, no record), apply or revert; a change is appended to the history.

    An apply looks first, without the lock: when nothing would change (already applied, not
    needed) or the inputs are bad, the node is left exactly as it was, lock file included.
    """
    runtime = runtime_for(host, deployment)
    if isinstance(runtime, OciRuntime):  # the derived image (docs/containers.md)
        if mode is Mode.CHECK:
            return sync_image_patches(
                node, host, deployment, runtime, mode=mode, on_progress=on_progress
            )
        with node_lock(node, host, "sync-patches", force=force_unlock, on_progress=on_progress):
            return sync_image_patches(
                node, host, deployment, runtime, mode=mode, on_progress=on_progress
            )
    if mode is not Mode.REVERT:
        looked = sync_patches(node, host, deployment, mode=Mode.CHECK, on_progress=on_progress)
        if mode is Mode.CHECK:
            return looked
        if looked.conflicts:
            # Refused before any write: let the applier say which file and hunk, unlocked.
            return sync_patches(node, host, deployment, mode=mode, on_progress=on_progress)
        if not any(o.status is PatchStatus.WOULD_APPLY for o in looked.outcomes):
            return looked
    with node_lock(node, host, "sync-patches", force=force_unlock, on_progress=on_progress):
        report = sync_patches(node, host, deployment, mode=mode, on_progress=on_progress)
        if report.changed:
            revert = mode is Mode.REVERT
            entry = HistoryRecord(
                action=Action.REVERT_PATCHES if revert else Action.SYNC_PATCHES,
                outcome=Outcome.REVERTED if revert else Outcome.APPLIED,
                host=host.name,
                who=operator(),
                at=datetime.now(UTC),
                deployment=deployment.name,
                patches=tuple(o.name for o in report.outcomes),
                repo_commit=inventory_commit(host),
                firedup_version=__version__,
                detail="; ".join(report.lines()),
            )
            try:
                append_history(node, host, entry)
            except DeployError as exc:
                on_progress(f"warning: could not append to the node's history: {exc}")
        return report
