"""`--revert`: put back the byte-identical originals of everything the node's record lists.

Works from the record and the backups alone, so it needs neither the patch files nor the
package to be importable. A file that changed since firedup patched it (a reinstall, a hand
edit) is never overwritten: the whole revert stops before touching anything.
"""

from __future__ import annotations

from collections.abc import Callable

from firedup.errors import PatchError
from firedup.inventory import HostSpec
from firedup.node import Node
from firedup.patching.plan import Contents
from firedup.patching.record import (
    Actor,
    Change,
    Event,
    Record,
    digest,
    fetch_backup,
    load_record,
    read_optional,
)
from firedup.patching.report import Mode, PatchOutcome, PatchReport, PatchStatus
from firedup.patching.writes import write_all


def _restorations(node: Node, host: HostSpec, record: Record, current: Contents) -> Contents:
    """The original bytes for each recorded file still in its patched state."""
    restore: Contents = {}
    for path, entry in record.files.items():
        now = digest(current[path])
        if now == entry.original_sha256:
            continue  # already original (reverted by hand, or reinstalled identically)
        if now != entry.patched_sha256:
            raise PatchError(
                f"{path} changed since firedup patched it (sha256 {now or 'missing'}, "
                f"expected {entry.patched_sha256}); refusing to revert, nothing was changed",
                hint="if the package was reinstalled, the patch is gone already: remove "
                f"{path} from the record in {host.workdir}/patches/record.json",
            )
        original = entry.original_sha256
        restore[path] = None if original is None else fetch_backup(node, host, original)
    return restore


def revert_all(
    node: Node,
    host: HostSpec,
    env: dict[str, str],
    listed: list[str],
    actor: Actor,
    on_progress: Callable[[str], None],
) -> PatchReport:
    """Revert every patch recorded on the node; `listed` (the deployment's) only for the report."""
    record = load_record(node, host)
    not_applied = [
        PatchOutcome(name, PatchStatus.NOT_APPLIED, detail="no record of it on the node")
        for name in listed
        if name not in record.patches
    ]
    if not record.files and not record.patches:
        return PatchReport(host.name, Mode.REVERT, tuple(not_applied))
    current = {path: read_optional(node, path) for path in record.files}
    restore = _restorations(node, host, record, current)
    event = Event(
        action="revert",
        patches=sorted(record.patches),
        files={p: Change.of(current[p], d) for p, d in restore.items()},
        at=actor.at,
        by=actor.who,
    )
    written = write_all(
        node,
        host,
        env,
        ({p: current[p] for p in restore}, restore),
        {p: e.original_mode for p, e in record.files.items()},
        (record, record.with_event(event, files={}, patches={})),
        record_first=False,
        on_progress=on_progress,
    )
    reverted = [
        PatchOutcome(name, PatchStatus.REVERTED, p.package, p.version, tuple(p.files))
        for name, p in sorted(record.patches.items())
    ]
    return PatchReport(
        host.name,
        Mode.REVERT,
        (*reverted, *not_applied),
        uploaded=tuple(restore),
        purged=written.purged,
        record_path=written.record_path,
    )
