"""Classify patches against the files as they are on the node: pure, so `--check` is the plan.

Patches are taken in the deployment's order and see each other's results, so two patches may
touch one file. A patch is `already applied` when its reverse applies exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from firedup.errors import PatchError
from firedup.patching.apply import HunkConflict, apply_patch
from firedup.patching.manifest import Patch
from firedup.patching.report import PatchOutcome, PatchStatus
from firedup.patching.target import PackageTarget
from firedup.patching.verify import check_problems, syntax_problem

Contents = dict[str, bytes | None]  # node path -> bytes, None when the file does not exist


@dataclass(frozen=True)
class Plan:
    outcomes: tuple[PatchOutcome, ...]
    before: Contents  # as read from the node
    after: Contents = field(default_factory=dict)  # only the files that change

    @property
    def conflicts(self) -> tuple[PatchOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status is PatchStatus.CONFLICTS)


def _version(target: PackageTarget, patch: Patch) -> Version:
    if target.version is None:
        raise PatchError(
            f"cannot tell which version of {target.package} is installed at "
            f"{', '.join(target.roots)} (no metadata, no __version__), so cannot decide "
            f"whether {patch.name} ({patch.manifest.versions}) is needed"
        )
    try:
        return Version(target.version)
    except InvalidVersion:
        raise PatchError(
            f"{target.package} at {', '.join(target.roots)} reports version "
            f"{target.version!r}, which is not a PEP 440 version"
        ) from None


def _try_all(
    patch: Patch, target: PackageTarget, current: Contents, *, reverse: bool
) -> Contents | HunkConflict:
    out: Contents = {}
    for fp in patch.files:
        path = target.files[fp.path].path
        try:
            out[path] = apply_patch(current[path], fp, reverse=reverse)
        except HunkConflict as exc:
            return exc
    return out


def _verify(patch: Patch, target: PackageTarget, contents: Contents) -> None:
    problems: list[str] = []
    for fp in patch.files:
        data = contents[target.files[fp.path].path]
        if fp.path.endswith(".py") and data is not None:
            problem = syntax_problem(fp.path, data)
            problems.extend([problem] if problem else [])
    for check in patch.manifest.verify:
        data = contents[target.files[check.file].path]
        problems.extend(check_problems(data or b"", check))
    if problems:
        raise PatchError(
            f"patch {patch.name} does not verify once applied: {'; '.join(problems)}",
            hint=f"fix the diff or the verify section in {patch.source}",
        )


def _classify_one(patch: Patch, target: PackageTarget, current: Contents) -> PatchOutcome:
    """The outcome for one patch; on `would apply`, `current` is advanced to its result."""
    files = tuple(target.files[fp.path].path for fp in patch.files)

    def outcome(status: PatchStatus, detail: str = "") -> PatchOutcome:
        return PatchOutcome(patch.name, status, target.package, target.version, files, detail)

    if not patch.manifest.specifier.contains(_version(target, patch), prereleases=True):
        detail = f"installed {target.version}, patch is for {patch.manifest.versions}"
        return outcome(PatchStatus.NOT_NEEDED, detail)
    forward = _try_all(patch, target, current, reverse=False)
    backward = _try_all(patch, target, current, reverse=True)
    if not isinstance(forward, HunkConflict) and not isinstance(backward, HunkConflict):
        # Applying twice must never happen, so an undecidable state is a conflict.
        detail = "applies both forwards and in reverse: cannot tell whether it is applied"
        return outcome(PatchStatus.CONFLICTS, detail)
    if not isinstance(forward, HunkConflict):
        current.update(forward)
        _verify(patch, target, current)
        return outcome(PatchStatus.WOULD_APPLY)
    if not isinstance(backward, HunkConflict):
        _verify(patch, target, current)
        return outcome(PatchStatus.ALREADY_APPLIED)
    return outcome(PatchStatus.CONFLICTS, str(forward))


def plan_patches(patches: list[Patch], targets: dict[str, PackageTarget], before: Contents) -> Plan:
    """Classify each patch in order; `before` holds every target file as read from the node."""
    current = dict(before)
    outcomes = [_classify_one(p, targets[p.manifest.package], current) for p in patches]
    after = {path: data for path, data in current.items() if data != before[path]}
    return Plan(tuple(outcomes), dict(before), after)
