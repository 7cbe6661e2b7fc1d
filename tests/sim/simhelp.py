"""Shared helpers of the simulator tests: the scenario table and small /proc readers."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAST = 4.0  # FIREDUP_SIM_SPEED for the tests: a Kimi EAGLE-3 startup takes ~1.5 s


# sim/ holds the scenario table and its runner; they are scripts of the dev machine, not a
# package, so their directory goes on sys.path (as record_fixtures.py does for itself).
if str(REPO / "sim") not in sys.path:
    sys.path.insert(0, str(REPO / "sim"))

import scenarios  # noqa: E402
import simrun  # noqa: E402

__all__ = ["FAST", "REPO", "children", "cmdline", "comm", "listening", "scenarios", "simrun"]


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
