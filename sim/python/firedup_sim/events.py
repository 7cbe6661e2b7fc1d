"""Wall-clock events for benchmarks: JSON lines appended to $FIREDUP_SIM_EVENTS."""

from __future__ import annotations

import json
import os
import signal
import time

_recorded: set[str] = set()


def record(event: str, **extra: object) -> None:
    """Once per event and process: a launcher gets one SIGQUIT per failing rank."""
    path = os.environ.get("FIREDUP_SIM_EVENTS")
    if not path:
        return
    # A nested SIGQUIT handler run would SIGKILL us mid-record: hold it until the line is out.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGQUIT})
    try:
        if event in _recorded:
            return
        _recorded.add(event)
        line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **extra})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
