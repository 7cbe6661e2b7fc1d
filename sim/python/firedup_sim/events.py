"""Wall-clock events for benchmarks: JSON lines appended to $FIREDUP_SIM_EVENTS."""

from __future__ import annotations

import json
import os
import time


def record(event: str, **extra: object) -> None:
    path = os.environ.get("FIREDUP_SIM_EVENTS")
    if not path:
        return
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **extra})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
