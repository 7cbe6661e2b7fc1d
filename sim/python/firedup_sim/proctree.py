"""Process-tree helpers over /proc (what psutil's children(recursive=True) gives)."""

from __future__ import annotations

import contextlib
import os
import signal


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(pid: int, sig: int = signal.SIGKILL) -> None:
    for child in descendants(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)
