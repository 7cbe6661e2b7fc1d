"""What a shared node says about its other users: our other slots and the GPU topology
(parsed from what node_share.py prints; pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from firedup.config.slots import parse_visible


@dataclass(frozen=True)
class OtherSlot:
    """Another slot of our workdir on this node, with its current run."""

    dir: str
    host: str  # the host entry that started its current run
    slot: str | None
    run_id: str
    deployment: str
    port: int
    pid: int
    alive: bool
    gpus: tuple[int, ...] | None  # as its run recorded them; None: not recorded
    start: int = -1  # its server's start time on the node's clock (/proc stat), -1 unknown

    @property
    def label(self) -> str:
        where = f"slot {self.slot}" if self.slot else f"the slot at {self.dir}"
        return f"{where} (host {self.host}, run {self.run_id}, port {self.port})"


@dataclass(frozen=True)
class Topology:
    """`nvidia-smi topo -m`: the link between each pair of GPUs and each GPU's NUMA node."""

    links: dict[tuple[int, int], str] = field(default_factory=dict)
    numa: dict[int, str] = field(default_factory=dict)

    def link(self, a: int, b: int) -> str:
        return self.links.get((a, b), "")


# The closer the better: NVLink (more links better), then PCIe paths by how far they go.
PCIE_RANK = {"PIX": 5, "PXB": 4, "PHB": 3, "NODE": 2, "SYS": 1, "SOC": 1}


def link_rank(link: str) -> int:
    match = re.fullmatch(r"NV(\d+)", link)
    if match:
        return 10 + int(match.group(1))
    return PCIE_RANK.get(link, 0)


def parse_topology(text: str | None) -> Topology:
    """Rows `GPUn  X  NV18 ... CPU-affinity NUMA-affinity [GPU-NUMA-ID]`, columns named by
    the header (GPUs first, then NICs); whitespace (the driver's tabs) separates cells."""
    if not text:
        return Topology()
    lines = text.splitlines()
    header = next((ln.split() for ln in lines if ln.split()[:1] == ["GPU0"]), None)
    if header is None:
        return Topology()
    columns = header[: header.index("CPU")] if "CPU" in header else header
    gpu_cols = [int(c[3:]) for c in columns if re.fullmatch(r"GPU\d+", c)]
    has_numa = "NUMA" in header
    links: dict[tuple[int, int], str] = {}
    numa: dict[int, str] = {}
    for line in lines:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]) or len(cells) < len(columns) + 1:
            continue
        a = int(cells[0][3:])
        for b, cell in zip(gpu_cols, cells[1 : 1 + len(gpu_cols)], strict=False):
            links[(a, b)] = cell
        rest = cells[1 + len(columns) :]
        if has_numa and len(rest) >= 2:
            numa[a] = rest[1]
    return Topology(links, numa)


def parse_slots(raw: Any) -> tuple[OtherSlot, ...]:
    out = []
    for item in raw or ():
        meta = item.get("meta") or {}
        gpus = meta.get("gpus")
        out.append(
            OtherSlot(
                dir=str(item.get("dir", "")),
                host=str(meta.get("host", "?")),
                slot=meta.get("slot"),
                run_id=str(meta.get("run_id", "?")),
                deployment=str(meta.get("deployment", "?")),
                port=int(meta.get("port", 0) or 0),
                pid=int(item.get("pid", -1)),
                alive=bool(item.get("alive")),
                gpus=tuple(int(g) for g in gpus) if isinstance(gpus, list) else None,
                start=int(item.get("start", -1)),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Share:
    slots: tuple[OtherSlot, ...] = ()
    topology: Topology = field(default_factory=Topology)


def parse_share(raw: Any) -> Share:
    if not isinstance(raw, dict):
        return Share()
    return Share(parse_slots(raw.get("slots")), parse_topology(raw.get("topology")))


__all__ = ["OtherSlot", "Share", "Topology", "link_rank", "parse_share", "parse_visible"]
