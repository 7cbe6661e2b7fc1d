"""Shared helpers of the simulator tests: the scenario table and small /proc readers."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
FAST = 4.0  # FIREDUP_SIM_SPEED for the tests: a Kimi EAGLE-3 startup takes ~1.5 s


def _load_scenarios() -> ModuleType:
    if "sim_scenarios" in sys.modules:
        return sys.modules["sim_scenarios"]
    spec = importlib.util.spec_from_file_location("sim_scenarios", REPO / "sim" / "scenarios.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sim_scenarios"] = module
    spec.loader.exec_module(module)
    return module


scenarios = _load_scenarios()


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
