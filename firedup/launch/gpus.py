"""GPU memory on a node, as nvidia-smi reports it: a command plus a pure parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.render import launch_env
from firedup.node.base import Node

QUERY_GPUS = "--query-gpu=index,name,memory.used,memory.total"
QUERY_GPUS_UTIL = "--query-gpu=index,name,memory.used,memory.total,utilization.gpu"
QUERY_APPS = "--query-compute-apps=pid,process_name,used_memory"
CSV = "--format=csv,noheader,nounits"


@dataclass(frozen=True)
class GpuMemory:
    index: int
    name: str
    used_mib: float
    total_mib: float
    util_pct: float | None = None  # when asked (status, top): nvidia-smi's utilization.gpu

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "used_mib": self.used_mib,
            "total_mib": self.total_mib,
            "util_pct": self.util_pct,
        }


@dataclass(frozen=True)
class GpuApp:
    pid: int
    name: str
    used_mib: float


def _rows(text: str, width: int) -> list[list[str]]:
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    return [r for r in rows if len(r) >= width]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_gpus(text: str) -> tuple[GpuMemory, ...]:
    out = []
    for r in _rows(text, 4):
        try:
            util = float(r[4]) if len(r) > 4 and _number(r[4]) else None
            out.append(GpuMemory(int(r[0]), r[1], float(r[2]), float(r[3]), util))
        except ValueError:
            continue
    return tuple(out)


def parse_apps(text: str) -> tuple[GpuApp, ...]:
    out = []
    for r in _rows(text, 3):
        try:
            out.append(GpuApp(int(r[0]), r[1], float(r[2])))
        except ValueError:
            continue
    return tuple(out)


def smi_argv(host: HostSpec, deployment: Deployment, query: str = QUERY_GPUS_UTIL) -> list[str]:
    # The server's environment: its PATH is where the node's nvidia-smi is.
    env = [f"{k}={v}" for k, v in launch_env(host, deployment).items()]
    return ["env", *env, "nvidia-smi", query, CSV]


def gpu_memory(node: Node, host: HostSpec, deployment: Deployment) -> tuple[GpuMemory, ...] | None:
    """Per-GPU memory, or None when the node has no working nvidia-smi."""
    result = node.run(smi_argv(host, deployment, QUERY_GPUS), check=False, timeout_s=30)
    return parse_gpus(result.out) if result.ok else None


def gpu_apps(node: Node, host: HostSpec, deployment: Deployment) -> tuple[GpuApp, ...] | None:
    result = node.run(smi_argv(host, deployment, QUERY_APPS), check=False, timeout_s=30)
    return parse_apps(result.out) if result.ok else None
