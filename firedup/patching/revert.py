"""`--revert`: put back the byte-identical originals of everything the node's record lists.

Works from the record and the backups alone, so it needs neither the patch files nor the
package to be importable. A file that changed since firedup patched it (a reinstall, a hand
edit) is never overwritten: the whole revert stops before touching anything.
"""

from __future__ import annotations

from collections.abc import Callable

from firedup.config.inventory import HostSpec
from firedup.errors import PatchError
from firedup.node.base import Node
from firedup.patching.plan import Contents
from firedup.patching.record import (
    Actor,
    Change,
    Event,
    Record,
    backup_path,
    checked_backup,
    digest,
    parse_record,
    record_bytes,
    record_path,
)
from firedup.patching.report import Mode, PatchOutcome, PatchReport, PatchStatus
from firedup.patching.target import read_files
from firedup.patching.writes import Write, write_all


def _restorations(
    node: Node, host: HostSpec, record: Record, current: Contents, backups: Contents
) -> Contents:
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
        if original is None:
            restore[path] = None  # firedup created it: reverting removes it
        else:
            where = backup_path(host, original)
            restore[path] = checked_backup(backups.get(where), where, original, node.name)
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
    raw = read_files(node, host, env, [record_path(host)])[record_path(host)]
    record = parse_record(raw, record_path(host), node.name)
    not_applied = [
        PatchOutcome(name, PatchStatus.NOT_APPLIED, detail="no record of it on the node")
        for name in listed
        if name not in record.patches
    ]
    if not record.files and not record.patches:
        return PatchReport(host.name, Mode.REVERT, tuple(not_applied))
    originals = {e.original_sha256 for e in record.files.values() if e.original_sha256}
    state = read_files(
        node, host, env, [*record.files, *(backup_path(host, d) for d in sorted(originals))]
    )
    current = {path: state[path] for path in record.files}
    restore = _restorations(node, host, record, current, state)
    event = Event(
        action="revert",
        patches=sorted(record.patches),
        files={p: Change.of(current[p], d) for p, d in restore.items()},
        at=actor.at,
        by=actor.who,
    )
    # Targets first, the record last: it must not forget a patch still on disk.
    writes = [
        Write(p, current[p], data, record.files[p].original_mode) for p, data in restore.items()
    ]
    cleared = record.with_event(event, files={}, patches={})
    writes.append(Write(record_path(host), raw, record_bytes(cleared), 0o644))
    purged = write_all(node, host, env, writes, on_progress=on_progress)
    reverted = [
        PatchOutcome(name, PatchStatus.REVERTED, p.package, p.version, tuple(p.files))
        for name, p in sorted(record.patches.items())
    ]
    return PatchReport(
        host.name,
        Mode.REVERT,
        (*reverted, *not_applied),
        uploaded=tuple(restore),
        purged=purged,
        record_path=record_path(host),
    )
