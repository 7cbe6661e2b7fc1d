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

from firedup.errors import PatchError
from firedup.inventory import HostSpec
from firedup.node import Node

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


def read_optional(node: Node, path: str) -> bytes | None:
    """A file's bytes, or None when it does not exist (any other failure raises)."""
    if not node.run(["test", "-e", path], check=False, what=f"test {path}").ok:
        return None
    return node.get(path)


def load_record(node: Node, host: HostSpec) -> Record:
    path = record_path(host)
    data = read_optional(node, path)
    if data is None:
        return Record()
    try:
        return Record.model_validate_json(data)
    except ValidationError as exc:
        raise PatchError(
            f"patch record {path} on {node.name} is damaged: {exc.errors()[0]['msg']}",
            hint="inspect it by hand; backups of the originals are beside it in backups/",
        ) from None


def save_record(node: Node, host: HostSpec, record: Record) -> str:
    path = record_path(host)
    node.put(record.model_dump_json(indent=2).encode() + b"\n", path, mode=0o644)
    return path


def store_backup(node: Node, host: HostSpec, data: bytes) -> str:
    path = backup_path(host, sha256(data))
    node.put(data, path, mode=0o444)
    return path


def fetch_backup(node: Node, host: HostSpec, digest: str) -> bytes:
    path = backup_path(host, digest)
    data = read_optional(node, path)
    if data is None or sha256(data) != digest:
        raise PatchError(
            f"backup {path} on {node.name} is "
            f"{'missing' if data is None else 'damaged (sha256 differs)'}; cannot restore"
        )
    return data
