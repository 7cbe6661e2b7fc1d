"""What a patch sync found and did, as values the task layer prints."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    CHECK = "check"  # classify only; the node is not changed
    APPLY = "apply"
    REVERT = "revert"


class PatchStatus(StrEnum):
    WOULD_APPLY = "would apply"
    ALREADY_APPLIED = "already applied"
    NOT_NEEDED = "not needed for this version"
    CONFLICTS = "conflicts"
    APPLIED = "applied"
    REVERTED = "reverted"
    NOT_APPLIED = "not applied"  # --revert: nothing recorded for this patch on the node


@dataclass(frozen=True)
class PatchOutcome:
    name: str
    status: PatchStatus
    package: str = ""
    version: str | None = None  # the installed version the decision was made against
    files: tuple[str, ...] = ()  # absolute paths on the node
    detail: str = ""  # why: the conflicting file and hunk, the version range, ...

    def line(self) -> str:
        where = f" ({self.package} {self.version})" if self.package and self.version else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.name}{where}: {self.status}{detail}"


@dataclass(frozen=True)
class PatchReport:
    host: str
    mode: Mode
    outcomes: tuple[PatchOutcome, ...]
    uploaded: tuple[str, ...] = ()  # files written on the node (targets, not backups)
    purged: tuple[str, ...] = ()  # stale .pyc files removed
    record_path: str | None = None  # the node's patch record, when it was written

    @property
    def changed(self) -> bool:
        return bool(self.uploaded)

    @property
    def conflicts(self) -> tuple[PatchOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status is PatchStatus.CONFLICTS)

    def lines(self) -> list[str]:
        out = [o.line() for o in self.outcomes] or ["no patches listed for this deployment"]
        if self.uploaded:
            out.append(f"wrote {len(self.uploaded)} file(s), purged {len(self.purged)} .pyc")
        if self.record_path:
            out.append(f"record: {self.record_path}")
        return out
