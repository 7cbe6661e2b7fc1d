"""The slot's watch as the launch layer sees it: end it before anything changes the slot.

The watch (firedup.readiness.nodewatch, started by a deploy: firedup.ops.keep) restarts a
server that died after ready. Whatever the operator does to the slot next (stop, a deploy, a
start) ends the watch first, so a stopped server is never brought back and a new deploy is
not raced by the old watch. `firedup/node/sh/watch_end.sh` waits for a watch in the middle of
a restart to finish that start: afterwards `current` names every server of the slot.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, replace
from typing import Any

from firedup.config.inventory import HostSpec
from firedup.errors import RemoteCommandError, StartError
from firedup.node.base import Node, parse_fields, run_script

END_WAIT_S = 30  # a watch mid-restart finishes its start.sh (seconds) within this
WATCH_FILE = "watch.json"
ON_STATES = frozenset({"starting", "watching", "backoff"})


def end_watch(node: Node, host: HostSpec) -> str:
    """End the slot's watch, if one runs: `ended`, `none`; raise if it would not go."""
    out = run_script(
        node,
        "watch_end",
        host.workdir,
        str(END_WAIT_S),
        timeout_s=END_WAIT_S + 30,
        what="end the watch",
    ).out
    fields = parse_fields(out)
    state = fields.get("state", "none")
    if state == "stuck":
        raise StartError(
            f"{host.name}: the watch (pid {fields.get('pid')}) survived KILL; not going on",
            hint=f"look at it on the node: ps -fp {fields.get('pid')}",
        )
    return state


@dataclass(frozen=True)
class WatchView:
    """A run's watch.json, as the watch last wrote it (format: docs/operations.md)."""

    state: str
    checked_at: float | None
    every_s: float
    restarts: tuple[dict[str, Any], ...]
    message: str
    death: dict[str, Any] | None
    attempt: int
    raw: dict[str, Any]
    alive: bool = True  # the watch process named in the file still runs (checked by pid)

    @property
    def on(self) -> bool:
        return self.alive and self.state in ON_STATES

    def text(self, now: float) -> str:
        """`fab status`'s words: on/off, the last check, the restarts and their reasons."""
        if self.on:
            ago = f", checked {max(0.0, now - self.checked_at):.0f}s ago" if self.checked_at else ""
            head = f"watch on ({self.state}{ago})"
        elif self.state in ON_STATES:
            head = "watch off (its process is gone)"
        else:
            head = f"watch off ({self.state}: {self.message})"
        if self.restarts:
            reasons = ", ".join(str(r.get("reason")) for r in self.restarts[-3:])
            head += f"; {len(self.restarts)} restart(s): {reasons}"
        return head

    def to_json(self) -> dict[str, Any]:
        return {
            "on": self.on,
            "state": self.state,
            "checked_at": self.checked_at,
            "every_s": self.every_s,
            "attempt": self.attempt,
            "restarts": [dict(r) for r in self.restarts],
            "death": self.death,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, text: bytes | str) -> WatchView:
        data: dict[str, Any] = json.loads(text)
        return cls(
            state=str(data.get("state") or "unknown"),
            checked_at=data.get("checked_at"),
            every_s=float(data.get("every_s") or 0),
            restarts=tuple(data.get("restarts") or ()),
            message=str(data.get("message") or ""),
            death=data.get("death"),
            attempt=int(data.get("attempt") or 0),
            raw=data,
        )


def read_watch(node: Node, rundir: str) -> WatchView | None:
    """The watch's view of a run; None when no watch ever looked at it."""
    try:
        text = node.get(posixpath.join(rundir, WATCH_FILE))
    except RemoteCommandError:
        return None
    try:
        view = WatchView.from_json(text)
    except (ValueError, TypeError):
        return None
    return replace(view, alive=_alive(node, view.raw.get("watch_pid"), view.raw.get("watch_start")))


def _alive(node: Node, pid: object, start: object) -> bool:
    """The watch's pid runs, is no zombie, and started when the watch did (no reused pid)."""
    if not isinstance(pid, int):
        return False
    stat = node.run(["cat", "--", f"/proc/{pid}/stat"], check=False).out
    fields = stat.rsplit(")", 1)[-1].split()
    return len(fields) > 19 and fields[0] not in ("Z", "X") and fields[19] == str(start)
