"""Process titles and parent-death signals without third-party modules.

setproctitle rewrites the argv area of the process; we do the same through /proc/self/mem
(allowed for a process on itself), and set the kernel comm name with prctl(PR_SET_NAME),
which `ps -o comm` and /proc/PID/comm show (truncated by the kernel to 15 characters).
"""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _argv_area() -> tuple[int, int]:
    with open("/proc/self/stat") as f:
        stat = f.read()
    # Fields after the ")" of comm start at field 3; arg_start/arg_end are fields 48/49.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[45]), int(fields[46])


def set_title(title: str) -> None:
    _libc().prctl(PR_SET_NAME, title.encode()[:15], 0, 0, 0)
    try:
        start, end = _argv_area()
        size = end - start
        data = title.encode()[: size - 1]
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(data + b"\0" * (size - len(data)))
    except OSError:
        pass  # comm is set; the full title is best effort (e.g. /proc/self/mem not writable)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    _libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
