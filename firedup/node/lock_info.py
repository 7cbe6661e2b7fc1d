"""What a node's firedup lock looks like from outside: who holds it (lock_status.sh, lock.json),
for `fab status`, for a refusal's message and for `fab stop`'s takeover of a deploy that only
waits. Taking and ending the lock is firedup.node.lock.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from firedup.config.inventory import HostSpec
from firedup.node.base import Node, run_script

WAITING_FILE = "lock.waiting"  # the holder pid of a deploy that only waits (lock_wait.sh)


class LockState(StrEnum):
    HELD = "held"  # a live holder has the flock
    STALE = "stale"  # a record whose holder is gone: it blocks nobody, and is reported


@dataclass(frozen=True)
class LockOwner:
    """Who asked for the lock, as written into lock.json (all from the operator's side)."""

    operator: str
    local_pid: int
    operation: str
    started_at: float
    detail: str = ""

    @classmethod
    def from_dict(cls, data: Any) -> LockOwner | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                operator=str(data["operator"]),
                local_pid=int(data["local_pid"]),
                operation=str(data["operation"]),
                started_at=float(data["started_at"]),
                detail=str(data.get("detail", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class LockInfo:
    """The lock as seen from outside: for `fab status` and for the refusal message."""

    host: str
    state: LockState
    owner: LockOwner | None
    holder_pid: int | None
    acquired_at: float | None  # node clock
    node_time: float | None = None

    @property
    def age_s(self) -> float | None:
        if self.acquired_at is None or self.node_time is None:
            return None
        return max(0.0, self.node_time - self.acquired_at)

    def describe(self) -> str:
        if self.owner is None:
            who = "an unknown owner (no readable record)"
        else:
            owner = self.owner
            who = f"{owner.operation} by {owner.operator} (local pid {owner.local_pid})"
            if owner.detail:
                who += f" [{owner.detail}]"
        when = ""
        if self.acquired_at is not None:
            stamp = datetime.fromtimestamp(self.acquired_at, UTC)
            when = f" since {stamp:%Y-%m-%d %H:%M:%S} UTC"
            if self.age_s is not None:
                when += f" ({self.age_s:.0f}s ago)"
        holder = f", holder pid {self.holder_pid} on the node" if self.holder_pid else ""
        return f"{who}{when}{holder}"

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "owner": asdict(self.owner) if self.owner else None,
            "holder_pid": self.holder_pid,
            "acquired_at": self.acquired_at,
            "age_s": self.age_s,
        }


def fields_of(stdout: bytes) -> dict[str, str]:
    text = stdout.decode("utf-8", "replace")
    return dict(ln.partition("=")[::2] for ln in text.splitlines() if "=" in ln)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_record(encoded: str) -> tuple[int | None, float | None, LockOwner | None]:
    """lock.json (base64, as the scripts print it) -> holder pid, acquired_at, owner."""
    try:
        data = json.loads(base64.b64decode(encoded, validate=True) or b"null")
    except (ValueError, binascii.Error):
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    pid = data.get("holder_pid")
    acquired = data.get("acquired_at")
    return (
        pid if isinstance(pid, int) else None,
        float(acquired) if isinstance(acquired, int | float) else None,
        LockOwner.from_dict(data.get("owner")),
    )


def parse_lock_status(host: str, stdout: bytes) -> LockInfo | None:
    """lock_status.sh output -> the lock, or None when it is free and nothing is left over."""
    fields = fields_of(stdout)
    pid, acquired, owner = parse_record(fields.get("record", ""))
    now = _float(fields.get("now", ""))
    holder = fields.get("holder", "none")
    held = fields.get("held") == "yes" or holder == "ours"
    if not held and holder == "none":
        return None
    if held:
        if holder != "ours":  # the flock is taken but the record is not its holder's
            pid, acquired, owner = None, None, None
        return LockInfo(host, LockState.HELD, owner, pid, acquired, now)
    return LockInfo(host, LockState.STALE, owner, pid, acquired, now)


def lock_status(node: Node, host: HostSpec) -> LockInfo | None:
    """The node's lock: None when free, HELD with its owner, or STALE (holder gone)."""
    out = run_script(node, "lock_status", host.workdir, what="read lock").stdout
    return parse_lock_status(host.name, out)


def waiting_holder(node: Node, host: HostSpec) -> LockInfo | None:
    """The lock, when its holder is a deploy that only waits for its server; else None."""
    path = posixpath.join(host.workdir, WAITING_FILE)
    marked = node.run(["cat", "--", path], check=False).out.strip()
    if not marked.isdigit():
        return None
    info = lock_status(node, host)
    held = info is not None and info.state is LockState.HELD
    return info if held and info is not None and info.holder_pid == int(marked) else None
