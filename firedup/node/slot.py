"""Slots: where a host entry's server lives, as the node sees it (address, port, workdir).

Two inventory hosts that resolve (after ssh_config) to the same sshd and the same workdir share
one `current` run, one lock and one history: one slot. A YAML `<<:` merge makes such pairs
naturally (the demo's story hosts are one node replaying three launches), so firedup names
them instead of letting one act on the other's server unawares.
"""

from __future__ import annotations

from collections.abc import Iterable

from firedup.config.inventory import HostSpec
from firedup.errors import DeployError
from firedup.node.ssh_config import resolve

Slot = tuple[str, str, int, str]  # transport, address, port, workdir


def slot_of(spec: HostSpec) -> Slot:
    if spec.transport == "local":
        return ("local", "localhost", 0, spec.workdir)
    try:
        target = resolve(spec).target
    except DeployError:
        return ("ssh", spec.address or "", spec.port, spec.workdir)  # unreadable ssh_config
    return ("ssh", target.host, target.port, spec.workdir)


def slot_mates(specs: Iterable[HostSpec]) -> dict[str, tuple[str, ...]]:
    """host name -> the other hosts among `specs` that share its slot."""
    by_slot: dict[Slot, list[str]] = {}
    for spec in specs:
        by_slot.setdefault(slot_of(spec), []).append(spec.name)
    return {
        name: tuple(n for n in names if n != name) for names in by_slot.values() for name in names
    }
