"""The node's own memory of what firedup patched: `<workdir>/patches/record.json`.

Originals are kept content-addressed in `<workdir>/patches/backups/<sha256>`, so a revert can
restore byte-identical files from any laptop, even when the patch files are gone locally. The
record is written *before* the targets are touched: if the connection dies mid-apply, the
record already knows every file and its original, and `--revert` can finish the job.
"""

from __future__ import annotations

import getpass
import hashlib
import posixpath
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from firedup.config.inventory import HostSpec
from firedup.errors import PatchError

HISTORY_KEEP = 200


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(data: bytes | None) -> str | None:
    return None if data is None else sha256(data)


@dataclass(frozen=True)
class Actor:
    """Who and when, for the node's record; injectable so tests can pin them."""

    who: str
    at: datetime

    @classmethod
    def now(cls) -> Actor:
        return cls(f"{getpass.getuser()}@{socket.gethostname()}", datetime.now(UTC))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileRecord(_Model):
    original_sha256: str | None  # None: the file did not exist before firedup created it
    original_mode: int | None
    patched_sha256: str
    patches: list[str]


class PatchRecord(_Model):
    package: str
    version: str
    root: str
    files: list[str]
    applied_at: datetime
    applied_by: str


class Change(_Model):
    before: str | None  # sha256; None: the file did not exist
    after: str | None

    @classmethod
    def of(cls, before: bytes | None, after: bytes | None) -> Change:
        return cls(before=digest(before), after=digest(after))


class Event(_Model):
    action: Literal["apply", "revert"]
    patches: list[str]
    files: dict[str, Change]
    at: datetime
    by: str


class Record(_Model):
    format: Literal[1] = 1
    patches: dict[str, PatchRecord] = Field(default_factory=dict)
    files: dict[str, FileRecord] = Field(default_factory=dict)
    history: list[Event] = Field(default_factory=list)

    def with_event(self, event: Event, **changes: object) -> Record:
        history = [*self.history, event][-HISTORY_KEEP:]
        return self.model_copy(update={**changes, "history": history})


def state_dir(host: HostSpec) -> str:
    return posixpath.join(host.workdir, "patches")


def record_path(host: HostSpec) -> str:
    return posixpath.join(state_dir(host), "record.json")


def backup_path(host: HostSpec, digest: str) -> str:
    return posixpath.join(state_dir(host), "backups", digest)


def parse_record(raw: bytes | None, path: str, node_name: str) -> Record:
    """The record from its bytes as read from the node (None: there is none yet)."""
    if raw is None:
        return Record()
    try:
        return Record.model_validate_json(raw)
    except ValidationError as exc:
        raise PatchError(
            f"patch record {path} on {node_name} is damaged: {exc.errors()[0]['msg']}",
            hint="inspect it by hand; backups of the originals are beside it in backups/",
        ) from None


def record_bytes(record: Record) -> bytes:
    return record.model_dump_json(indent=2).encode() + b"\n"


def checked_backup(data: bytes | None, path: str, digest: str, node_name: str) -> bytes:
    """A backup's bytes, refused unless they are exactly the original they stand for."""
    if data is None or sha256(data) != digest:
        state = "missing" if data is None else "damaged (sha256 differs)"
        raise PatchError(f"backup {path} on {node_name} is {state}; cannot restore")
    return data
