"""GPU memory of the simulated node, kept as one small JSON file per (gpu, process).

A rank process writes how much memory it holds on its GPU; the file is removed at exit, and a
file whose pid is gone, a zombie, or reused (the start time differs) is ignored, so a
SIGKILLed rank frees its memory exactly as the driver would, reaped or not.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

GPU_COUNT = 8
GPU_NAME = "NVIDIA H200"
TOTAL_MIB = 143771
CONTEXT_MIB = 530  # what a CUDA context costs each process before any allocation


@dataclass(frozen=True)
class Usage:
    gpu: int
    pid: int
    name: str
    used_mib: int


def physical(ordinal: int) -> int:
    """The node's GPU index (nvidia-smi's) of CUDA device `ordinal` of this process: CUDA
    numbers the GPUs that CUDA_VISIBLE_DEVICES lists, in its order (with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, as firedup exports, CUDA's order is nvidia-smi's). An
    ordinal past the visible list fails as CUDA does: `invalid device ordinal`."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        visible = list(range(GPU_COUNT))
    else:  # CUDA stops at the first entry it cannot read, as the driver does
        visible = []
        for item in raw.split(","):
            item = item.strip()
            if not item.isdigit() or int(item) >= GPU_COUNT or int(item) in visible:
                break
            visible.append(int(item))
    if not 0 <= ordinal < len(visible):
        raise RuntimeError("CUDA error: invalid device ordinal")
    return visible[ordinal]


def state_dir() -> Path:
    path = Path(os.environ.get("FIREDUP_SIM_STATE") or f"/tmp/firedup-sim-{os.getuid()}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _start_time(pid: int) -> str | None:
    """The live process's start time; None when it is gone or has exited and waits to be
    reaped (a zombie): the driver frees a process's memory as it exits, zombie or not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _state_files() -> list[Path]:
    return sorted(state_dir().glob("gpu*.json"))


def _sweep_tmp() -> None:
    for path in state_dir().glob("gpu*.tmp"):
        pid = int(path.name.split(".")[1])
        if _start_time(pid) is None:
            with contextlib.suppress(OSError):
                path.unlink()


def live_usages() -> list[Usage]:
    _sweep_tmp()
    usages = []
    for path in _state_files():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _start_time(data["pid"]) != data["start"]:
            with contextlib.suppress(OSError):
                path.unlink()  # its process is gone: the driver has freed that memory
            continue
        usages.append(Usage(data["gpu"], data["pid"], data["name"], data["used_mib"]))
    return usages


def used_mib(gpu: int) -> int:
    return sum(u.used_mib for u in live_usages() if u.gpu == gpu)


def avail_gb(gpu: int) -> float:
    """Free memory of the node's GPU `gpu` (a physical index, as Holder.gpu)."""
    return (TOTAL_MIB - used_mib(gpu)) / 1024


class Holder:
    """Memory one process holds on one GPU."""

    def __init__(self, ordinal: int, name: str, *, node_index: int | None = None) -> None:
        # The node's index (what nvidia-smi shows): CUDA's ordinal mapped, or given as is.
        self.gpu = physical(ordinal) if node_index is None else node_index
        self.name = name
        self.used = CONTEXT_MIB
        self.path = state_dir() / f"gpu{self.gpu}.{os.getpid()}.json"
        atexit.register(self.release)
        self._write()

    def add_gb(self, gb: float) -> None:
        self.used += int(gb * 1024)
        self._write()

    def _write(self) -> None:
        pid = os.getpid()
        data = {
            "gpu": self.gpu,
            "pid": pid,
            "start": _start_time(pid),
            "name": self.name,
            "used_mib": self.used,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.chmod(0o644)  # nvidia-smi shows every user's processes
        os.replace(tmp, self.path)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
