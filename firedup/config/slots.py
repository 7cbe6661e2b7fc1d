"""Slots and GPU sets: the one place their names and spellings are decided (pure).

A host entry's state on its node (runs/, current, the lock, the history) lives in its slot's
directory: the `workdir` itself, or `<workdir>/slots/<slot>` when the entry says `slot:`.
Several deployments share a node as slots of one workdir; firedup finds its other slots there
(`<root>/current`, `<root>/slots/*/current`).

A deployment's GPUs: `gpus:` (a list of node GPU indices, or `auto`), or a
CUDA_VISIBLE_DEVICES the launch environment sets (the same thing said another way).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Literal

SLOTS_DIR = "slots"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
ORDER_ENV = "CUDA_DEVICE_ORDER"  # PCI_BUS_ID: CUDA numbers GPUs as nvidia-smi does
GpuRequest = tuple[int, ...] | Literal["auto"] | None


def slot_workdir(root: str, slot: str | None) -> str:
    """The slot's directory on the node."""
    return posixpath.join(root, SLOTS_DIR, slot) if slot else root


def slot_root(workdir: str, slot: str | None) -> str:
    """The directory all slots of a node's workdir live under (the inventory's `workdir`)."""
    if not slot:
        return workdir
    return posixpath.dirname(posixpath.dirname(workdir))


def slot_label(host: str, slot: str | None) -> str:
    return f"{host} (slot {slot})" if slot else host


def parse_visible(value: str) -> tuple[int, ...] | None:
    """CUDA_VISIBLE_DEVICES as node GPU indices; None when it names GPUs otherwise (UUIDs,
    MIG instances), which firedup does not map."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items or not all(v.isdigit() for v in items):
        return None
    return tuple(int(v) for v in items)


def spell_gpus(gpus: tuple[int, ...]) -> str:
    return ",".join(str(g) for g in gpus)


def gpu_request(gpus: tuple[int, ...] | str | None, env: Mapping[str, str]) -> GpuRequest:
    """What the deployment asks for: its `gpus:`, else the launch environment's
    CUDA_VISIBLE_DEVICES (indices only), else nothing (the engine takes 0..n-1)."""
    if gpus == "auto":
        return "auto"
    if isinstance(gpus, tuple):
        return gpus
    raw = env.get(VISIBLE_ENV)
    return parse_visible(raw) if raw is not None else None


def gpu_env(gpus: tuple[int, ...], env: Mapping[str, str]) -> dict[str, str]:
    """What the launch exports for a chosen GPU set. Both engines number the GPUs they see
    from 0 (SGLang's --base-gpu-id stays 0, vLLM's workers take 0..tp-1): CUDA_DEVICE_ORDER
    makes CUDA's numbering nvidia-smi's, so index 4 is the GPU nvidia-smi calls 4."""
    out = {VISIBLE_ENV: spell_gpus(gpus)}
    if ORDER_ENV not in env:
        out[ORDER_ENV] = "PCI_BUS_ID"
    return out


def check_gpus_key(gpus: list[int] | str | None, per_node: int, env: Mapping[str, str]) -> None:
    """`gpus:` at load: as many GPUs as a node's share of tp, each once, and no contrary
    CUDA_VISIBLE_DEVICES beside it (ValueError, the loader names the key)."""
    if isinstance(gpus, list):
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"gpus: {gpus} names a GPU twice")
        if len(gpus) != per_node:
            raise ValueError(
                f"gpus: {len(gpus)} GPU(s) listed, but tp over the nodes needs {per_node} per "
                "node; list that many, or write 'auto'"
            )
    raw = env.get(VISIBLE_ENV)
    if (
        gpus is not None
        and raw is not None
        and (gpus == "auto" or parse_visible(raw) != tuple(gpus))
    ):
        raise ValueError(f"gpus: {gpus} and env {VISIBLE_ENV}={raw} say different things; keep one")
