"""`sync_patches`: check, apply (all or nothing) or revert a deployment's patches on a node.

Applying happens in Python on the operator's side: read the targets, apply exactly in memory,
verify by parsing, then upload atomically. Every patch is classified before anything is
written; a conflict, a failed verification or a read-only target stops the run with the node
untouched. Once writing starts, any failure restores every touched file from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from firedup.config.inventory import Deployment, HostSpec
from firedup.errors import PatchError
from firedup.node.base import Node
from firedup.patching.manifest import Patch, find_patches
from firedup.patching.plan import Contents, Plan, plan_patches
from firedup.patching.record import (
    Actor,
    Change,
    Event,
    FileRecord,
    PatchRecord,
    Record,
    backup_path,
    digest,
    parse_record,
    record_bytes,
    record_path,
    sha256,
)
from firedup.patching.report import Mode, PatchOutcome, PatchReport, PatchStatus
from firedup.patching.revert import revert_all
from firedup.patching.target import PackageTarget, locate, node_env, read_files
from firedup.patching.writes import Write, write_all

Progress = Callable[[str], None]


def sync_patches(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    *,
    mode: Mode = Mode.APPLY,
    patches_root: Path | None = None,
    on_progress: Progress = lambda _m: None,
    actor: Actor | None = None,
) -> PatchReport:
    """Bring the deployment's patches on `node` to the state `mode` asks for.

    Raises PatchError (the node left as it was) for bad manifests, missing patch files, an
    unimportable package, conflicts (in APPLY), failed verification and read-only targets.
    """
    actor = actor or Actor.now()
    env = node_env(host, deployment)
    if mode is Mode.REVERT:
        return revert_all(node, host, env, deployment.patches, actor, on_progress)
    patches = find_patches(deployment.patches, patches_root)
    if not patches:
        return PatchReport(host.name, mode, ())
    targets = _locate_all(node, host, env, patches, on_progress)
    before: Contents = {f.path: f.data for t in targets.values() for f in t.files.values()}
    plan = plan_patches(patches, targets, before)
    if mode is Mode.CHECK:
        return PatchReport(host.name, mode, plan.outcomes)
    if plan.conflicts:
        raise PatchError(
            f"{len(plan.conflicts)} patch(es) do not apply on {node.name}; nothing was changed: "
            + "; ".join(f"{o.name}: {o.detail}" for o in plan.conflicts),
            hint="run `fab sync-patches --check` to see every patch's state",
        )
    if not plan.after:
        return PatchReport(host.name, mode, plan.outcomes)
    _require_writable(targets, plan)
    return _apply(node, host, env, patches, targets, plan, actor, on_progress)


def _locate_all(
    node: Node, host: HostSpec, env: dict[str, str], patches: list[Patch], on_progress: Progress
) -> dict[str, PackageTarget]:
    wanted: dict[str, list[str]] = {}
    for patch in patches:
        wanted.setdefault(patch.manifest.package, []).extend(patch.manifest.files)
    targets = {}
    for package, rels in wanted.items():
        target = locate(node, host, env, package, sorted(set(rels)))
        on_progress(f"{package} {target.version} at {', '.join(target.roots)}")
        targets[package] = target
    return targets


def _require_writable(targets: dict[str, PackageTarget], plan: Plan) -> None:
    for target in targets.values():
        for f in target.files.values():
            if f.path not in plan.after:
                continue
            if not f.writable or not f.pycache_writable:
                what = "its directory" if not f.writable else "its __pycache__"
                raise PatchError(
                    f"cannot patch {f.path}: {what} is read-only for the ssh user; "
                    "nothing was changed",
                    hint="connect as the user that owns the environment, or make it writable",
                )


def _apply(
    node: Node,
    host: HostSpec,
    env: dict[str, str],
    patches: list[Patch],
    targets: dict[str, PackageTarget],
    plan: Plan,
    actor: Actor,
    on_progress: Progress,
) -> PatchReport:
    """Backups, then the record, then the targets: a crash at any point leaves a revertable
    node, and a failure rolls all of it back."""
    originals = {d for p, d in plan.before.items() if p in plan.after and d is not None}
    backups = {backup_path(host, sha256(d)): d for d in originals}
    state = read_files(node, host, env, [record_path(host), *backups])
    old_raw = state[record_path(host)]
    old_record = parse_record(old_raw, record_path(host), node.name)
    record = _record_apply(old_record, patches, targets, plan, actor)
    writes = [Write(path, state[path], data, 0o444) for path, data in backups.items()]
    writes.append(Write(record_path(host), old_raw, record_bytes(record), 0o644))
    modes = {f.path: f.mode for t in targets.values() for f in t.files.values()}
    writes += [Write(p, plan.before[p], d, modes[p]) for p, d in plan.after.items()]
    purged = write_all(node, host, env, writes, on_progress=on_progress)
    outcomes = tuple(
        _applied(o) if o.status is PatchStatus.WOULD_APPLY else o for o in plan.outcomes
    )
    return PatchReport(
        host.name, Mode.APPLY, outcomes, tuple(plan.after), purged, record_path(host)
    )


def _applied(outcome: PatchOutcome) -> PatchOutcome:
    return PatchOutcome(
        outcome.name, PatchStatus.APPLIED, outcome.package, outcome.version, outcome.files
    )


def _record_apply(
    record: Record,
    patches: list[Patch],
    targets: dict[str, PackageTarget],
    plan: Plan,
    actor: Actor,
) -> Record:
    """The record once the plan's files are written; originals from earlier runs are kept."""
    applying = {o.name for o in plan.outcomes if o.status is PatchStatus.WOULD_APPLY}
    patch_records = dict(record.patches)
    touching: dict[str, list[str]] = {}
    for patch in (p for p in patches if p.name in applying):
        target = targets[patch.manifest.package]
        paths = [target.files[fp.path].path for fp in patch.files]
        patch_records[patch.name] = PatchRecord(
            package=target.package,
            version=str(target.version),
            root=target.roots[0],
            files=paths,
            applied_at=actor.at,
            applied_by=actor.who,
        )
        for path in paths:
            touching.setdefault(path, []).append(patch.name)
    modes = {f.path: f.mode for t in targets.values() for f in t.files.values()}
    files = dict(record.files)
    for path, after in plan.after.items():
        files[path] = _file_record(
            files.get(path), plan.before[path], after, modes[path], touching[path]
        )
    event = Event(
        action="apply",
        patches=[p.name for p in patches if p.name in applying],
        files={p: Change.of(plan.before[p], d) for p, d in plan.after.items()},
        at=actor.at,
        by=actor.who,
    )
    return record.with_event(event, files=files, patches=patch_records)


def _file_record(
    earlier: FileRecord | None,
    before: bytes | None,
    after: bytes | None,
    mode: int | None,
    names: list[str],
) -> FileRecord:
    """Keep the first original when this run builds on an earlier firedup patch."""
    assert after is not None  # patches never delete files
    if earlier is not None and earlier.patched_sha256 == digest(before):
        return FileRecord(
            original_sha256=earlier.original_sha256,
            original_mode=earlier.original_mode,
            patched_sha256=sha256(after),
            patches=[*earlier.patches, *names],
        )
    return FileRecord(
        original_sha256=digest(before),
        original_mode=mode,
        patched_sha256=sha256(after),
        patches=names,
    )
