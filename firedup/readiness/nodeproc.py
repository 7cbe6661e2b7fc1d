"""What both node-side programs (the wait's reader, status's facts) know of a run's files and
process: stdlib only, Python 3.8, and cheap to import (no classifier: status often needs none).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from firedup.logscan import ScanState

SUMMARY_FILE = "reader.json"  # in the run dir: what the reader learned, for `fab status`
SUMMARY_EVERY_S = 5.0  # at most this often while only the offset moves


def alive(pid: int | None) -> bool:
    """The server's main process exists and has not exited (no pid: read what is there, then
    stop). An exited process nobody has reaped yet (a zombie) is dead, as probe.sh says."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc to ask: kill -0 said it exists
    return state not in ("Z", "X")


class Summary:
    """What the in-order classifier learned, kept next to the log (`<rundir>/reader.json`,
    replaced atomically) so `fab status` reads it instead of the log: the state and the
    offset it covers. Written when the verdict, phase or cause moves, and at most every
    SUMMARY_EVERY_S otherwise; a run dir we cannot write to just has none."""

    def __init__(self, log_path: str) -> None:
        self.path = os.path.join(os.path.dirname(log_path), SUMMARY_FILE)
        self.at = 0.0

    def write(self, state: ScanState, offset: int, now: float, moved: bool) -> None:
        if not moved and now - self.at < SUMMARY_EVERY_S:
            return
        self.at = now
        body = json.dumps({"offset": offset, "scan": state.to_json()}, separators=(",", ":"))
        tmp = self.path + ".tmp"
        try:  # 0600 like the run's other files: the state names the log's lines
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(body)
            os.replace(tmp, self.path)
        except OSError:
            pass
