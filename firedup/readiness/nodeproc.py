"""What both node-side programs (the wait's reader, status's facts) know of a run's files and
process: stdlib only, Python 3.8, and cheap to import (no classifier: status often needs none).
"""

from __future__ import annotations

import os

SUMMARY_FILE = "reader.json"  # in the run dir: what the reader learned, for `fab status`


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
