"""A per-node lock for operations that change what runs there (deploy, stop, restart, patches).

The lock is a flock on `<workdir>/.lock`, held by a small process on the node
(firedup/node/sh/lock_hold.sh) that lives exactly as long as the operator's channel to it: it
writes one byte a second, so when the operator goes away (done, Ctrl-C, crash, dropped link)
the next byte fails and the lock ends with it. There is no lease to expire and a crashed
operator never leaves a lock behind. Its record, `<workdir>/lock.json`, names the owner so a
second operator is refused with a name, not a hang. Reading the lock from outside (who holds
it) is firedup.node.lock_info, re-exported here. See docs/history.md ("The lock").
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from typing import Any

from firedup.config.inventory import HostSpec
from firedup.errors import CommandResult, ConnectError, DeployError, LockedError, RemoteCommandError
from firedup.node.base import Node, operator, parse_fields, run_script, script_argv
from firedup.node.lock_info import (
    LockInfo,
    LockOwner,
    LockState,
    lock_status,
    parse_lock_status,
    parse_record,
    waiting_holder,
)

__all__ = [
    "HeldLock",
    "LockInfo",
    "LockOwner",
    "LockState",
    "UnlockReport",
    "force_unlock",
    "lock_status",
    "mark_waiting",
    "node_lock",
    "parse_lock_status",
    "parse_record",
    "waiting_holder",
]

LOCK_FILE = ".lock"
RECORD_FILE = "lock.json"
BEAT_S = 1  # how soon a holder notices its operator is gone
ACQUIRE_TIMEOUT_S = 20.0
STREAM_TICK_S = 0.5

_held = threading.local()  # per thread: (host name, workdir) -> [HeldLock, depth]


@dataclass(frozen=True)
class UnlockReport:
    state: str  # released | gone | foreign | none (see firedup/node/sh/lock_end.sh)
    holder_pid: int | None
    previous: LockInfo | None


def _end_holder(node: Node, host: HostSpec, pid: int | None) -> tuple[str, int | None]:
    args = [host.workdir] + ([str(pid)] if pid is not None else [])
    fields = parse_fields(run_script(node, "lock_end", *args, timeout_s=30, what="unlock").stdout)
    value = fields.get("pid", "")
    return fields.get("state", "unknown"), int(value) if value.isdigit() else None


def force_unlock(node: Node, host: HostSpec) -> UnlockReport:
    """End the recorded holder (only if it is a firedup lock holder) and clear its record."""
    previous = lock_status(node, host)
    state, pid = _end_holder(node, host, None)
    if state == "foreign":
        raise LockedError(
            f"{host.name}: the lock record names pid {pid}, which is not a firedup lock holder; "
            "not killing it",
            hint=f"look at it on the node (ps -fp {pid}); remove {host.workdir}/{RECORD_FILE} "
            "by hand if it is stale",
        )
    if state == "none" and previous is not None and previous.state is LockState.HELD:
        raise LockedError(
            f"{host.name}: the lock is held by a process that left no record; not killing it",
            hint=f"find it with `fuser {posixpath.join(host.workdir, LOCK_FILE)}` on the node",
        )
    return UnlockReport(state=state, holder_pid=pid, previous=previous)


@dataclass
class HeldLock:
    """A lock this process holds; `release()` ends it (the `node_lock` context does that)."""

    node: Node
    host: HostSpec
    owner: LockOwner
    holder_pid: int
    _stream: Iterator[bytes] = field(repr=False)
    lost: bool = False  # set on release when the holder had already died (connection dropped)
    generation: int = 0  # the node's connection generation the holder was started on
    warning: str = ""  # the holder's own words when it holds without a record (a full disk)
    retaken: bool = False  # re-taken after a dropped connection (refresh)
    closed_from: str = ""  # the workdir's mode before the holder closed it to 0700

    def is_held(self) -> bool:
        info = lock_status(self.node, self.host)
        return (
            info is not None and info.state is LockState.HELD and info.holder_pid == self.holder_pid
        )

    def refresh(self) -> bool:
        """After a reconnect: take the lock again if it ended with the old connection.

        Returns True when it had to be re-taken; raises LockedError if someone else has it now.
        """
        # Touch the node first: after a drop this is what reconnects, and only then does the
        # generation tell whether the holder's connection is still the one in use.
        self.node.run(["true"], timeout_s=15, what="reach the node")
        if _generation(self.node) == self.generation:
            return False  # same connection: the holder's channel is the one we started
        # The holder's channel died with the old connection; the holder notices at its next
        # heartbeat. Do not wait for that (nor believe its flock meanwhile): end it, take again.
        _close(self._stream)
        with suppress(DeployError):
            _end_holder(self.node, self.host, self.holder_pid)
        again = _acquire_retrying(self.node, self.host, self.owner, self.holder_pid)
        self.holder_pid, self._stream, self.lost = again.holder_pid, again._stream, True
        self.generation, self.retaken = again.generation, True
        return True

    def release(self) -> None:
        try:
            state, _ = _end_holder(self.node, self.host, self.holder_pid)
            self.lost = self.lost or state == "gone"
        except ConnectError:
            self.lost = True  # the holder dies with the connection anyway
        finally:
            _close(self._stream)


def _close(stream: Iterator[bytes]) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        with suppress(DeployError):
            close()


MAX_ANSWER_BYTES = 1 << 20


def _first_lines(stream: Iterator[bytes], host: str, timeout_s: float) -> dict[str, str]:
    """Read the holder's answer: `locked pid=N`, or `busy` + `record=...` then EOF."""
    buffer = b""
    deadline = time.monotonic() + timeout_s
    for chunk in stream:
        buffer += chunk
        start = buffer.find(b"locked pid=")
        if start >= 0 and b"\n" in buffer[start:]:
            break
        if len(buffer) > MAX_ANSWER_BYTES:  # the holder says a few short lines, nothing more
            raise LockedError(f"{host}: the lock holder's answer is too long: not a lock holder")
        if time.monotonic() > deadline:
            raise LockedError(f"{host}: no answer from the lock holder after {timeout_s:.0f}s")
    fields = parse_fields(buffer)
    if "busy" in buffer.decode("utf-8", "replace").split():
        fields["busy"] = "yes"
    return fields


def _generation(node: Node) -> int:
    return int(getattr(node, "generation", 0))


def _acquire_retrying(node: Node, host: HostSpec, owner: LockOwner, old_pid: int) -> HeldLock:
    """Take the lock again while our own ended holder may still be on its way out."""
    deadline = time.monotonic() + ACQUIRE_TIMEOUT_S
    while True:
        try:
            return _acquire(node, host, owner)
        except LockedError:
            info = lock_status(node, host)
            ours = info is not None and info.holder_pid == old_pid
            if not ours or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _acquire(node: Node, host: HostSpec, owner: LockOwner) -> HeldLock:
    owner_json = json.dumps(asdict(owner), sort_keys=True)
    argv = script_argv("lock_hold", host.workdir, owner_json, str(BEAT_S))
    stream = node.stream(argv, timeout_s=STREAM_TICK_S)
    try:
        fields = _first_lines(stream, host.name, ACQUIRE_TIMEOUT_S)
    except BaseException:
        _close(stream)
        raise
    pid = fields.get("locked pid", "")
    if pid.isdigit():
        return HeldLock(
            node,
            host,
            owner,
            int(pid),
            stream,
            generation=_generation(node),
            warning=fields.get("warning", ""),
            closed_from=fields.get("closed", ""),
        )
    _close(stream)
    if fields.get("busy"):
        holder, acquired, current = parse_record(fields.get("record", ""))
        now = fields.get("now", "")
        node_now = float(now) if now.replace(".", "", 1).isdigit() else None
        info = LockInfo(host.name, LockState.HELD, current, holder, acquired, node_now)
        raise LockedError(
            f"{host.name} is locked: {info.describe()}; refusing to {owner.operation}",
            hint="wait for it to finish; if that operation is dead, "
            f"`fab unlock --host {host.name}` or retry with --force-unlock",
        )
    if fields.get("error"):
        # Not somebody else's lock: the node refused (full disk, read-only workdir).
        error = RemoteCommandError(
            CommandResult(("lock_hold",), 2, b"", fields["error"].encode(), host.name),
            what=f"taking the lock on {host.name}",
        )
        if fields["error"].startswith("cannot create the workdir"):
            error.hint = WORKDIR_HINT
        raise error
    raise LockedError(f"{host.name}: could not take the lock: no answer")


WORKDIR_HINT = (
    "set the host's 'workdir' to a directory the login user owns (e.g. under its home), "
    "or create it once as root and chown it to that user"
)


@contextmanager
def node_lock(
    node: Node,
    host: HostSpec,
    operation: str,
    *,
    force: bool = False,
    detail: str = "",
    on_progress: Callable[[str], None] = lambda _m: None,
) -> Iterator[HeldLock]:
    """Hold the node's lock for the block; raise LockedError naming the owner if it is taken.

    Re-entrant within one thread: a nested `node_lock` on the same host and workdir (e.g.
    restart calling stop) shares the outer lock. `force` first ends the current holder (see
    `force_unlock`) and says so through `on_progress`.
    """
    key = (host.name, host.workdir)
    held: dict[tuple[str, str], list[Any]] = _held.__dict__.setdefault("locks", {})
    if key in held:
        held[key][1] += 1
        try:
            yield held[key][0]
        finally:
            held[key][1] -= 1
        return
    if force:
        report = force_unlock(node, host)
        if report.previous is not None:
            on_progress(f"force-unlock: ended {report.previous.describe()} ({report.state})")
    owner = LockOwner(operator(), os.getpid(), operation, time.time(), detail)
    lock = _acquire(node, host, owner)  # lock.warning: the caller says it where it matters
    if lock.closed_from:
        on_progress(
            f"the workdir {host.workdir} was mode {lock.closed_from.zfill(4)}, open to others: "
            "closed to 0700 (firedup keeps runs, logs and secrets private; docs/security.md)"
        )
    held[key] = [lock, 1]
    try:
        yield lock
    finally:
        del held[key]
        lock.release()
        if lock.lost and _generation(node) == lock.generation and not lock.retaken:
            on_progress(
                "the lock was taken over while this operation ran "
                "(`fab unlock`, --force-unlock, or `fab stop` during the wait)"
            )
        elif lock.lost:
            on_progress("the lock had ended with a dropped connection before release")


def mark_waiting(node: Node, host: HostSpec, lock: HeldLock) -> None:
    """Say on the node that this lock's operation only waits now: `fab stop` may take it over.
    Best effort (a full disk): then stop is refused as before, naming the owner."""
    with suppress(DeployError):
        run_script(node, "lock_wait", host.workdir, str(lock.holder_pid), check=False)
