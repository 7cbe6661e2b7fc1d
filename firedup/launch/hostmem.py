"""Host memory on a node (/proc/meminfo): what `fab status` shows for a CPU node (pure parser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firedup.node.base import Node

GIB = 1024**3


@dataclass(frozen=True)
class HostMemoryUse:
    total_bytes: int
    available_bytes: int

    @property
    def used_bytes(self) -> int:
        return max(0, self.total_bytes - self.available_bytes)

    def to_json(self) -> dict[str, Any]:
        return {"total_bytes": self.total_bytes, "available_bytes": self.available_bytes}

    def text(self) -> str:
        return f"memory {self.used_bytes / GIB:.1f}/{self.total_bytes / GIB:.1f} GiB used"


def parse_meminfo(text: str) -> HostMemoryUse | None:
    """`MemTotal:  12412700 kB` lines -> total and available bytes; None when absent."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key.strip()] = int(fields[0]) * 1024
    if "MemTotal" not in values or "MemAvailable" not in values:
        return None
    return HostMemoryUse(values["MemTotal"], values["MemAvailable"])


def host_memory(node: Node) -> HostMemoryUse | None:
    result = node.run(["cat", "/proc/meminfo"], check=False, timeout_s=30)
    return parse_meminfo(result.out) if result.ok else None
