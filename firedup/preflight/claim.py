"""After a start: did another slot of ours take an overlapping GPU set at the same moment?

Preflight reads the other slots before the launch; two deploys of different slots that run at
once can both pass it. Each therefore looks again once its server has started: of two live
runs with overlapping GPUs, the one whose server started later (on the node's own clock, from
start.sh's identity record; the slot directory breaks a tie) gives way. A run that looks before
the other has started sees nothing and is the earlier one; the later one always sees it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from firedup.config.inventory import HostSpec
from firedup.errors import RemoteCommandError
from firedup.node.base import Node
from firedup.preflight.sharing import OtherSlot, parse_slots

TAIL = "\nimport json as _j, sys as _s\nprint(_j.dumps(claim_facts(_j.loads(_s.argv[1]))))\n"


@cache
def _snippet() -> str:
    text = resources.files("firedup.preflight").joinpath("node_share.py").read_text("utf-8")
    return text + TAIL


def rival(slots: tuple[OtherSlot, ...], own_dir: str, gpus: tuple[int, ...]) -> OtherSlot | None:
    """The live slot that claimed one of `gpus` before ours did (pure), if any."""
    own = next((s for s in slots if s.dir == own_dir), None)
    if own is None or own.start < 0:
        return None
    for other in slots:
        if other is own or not other.alive or not set(other.gpus or ()) & set(gpus):
            continue
        if (other.start, other.dir) < (own.start, own.dir) and other.start >= 0:
            return other
    return None


def claim_rival(node: Node, host: HostSpec, gpus: tuple[int, ...]) -> OtherSlot | None:
    argv = [host.python, "-c", _snippet(), json.dumps({"slot_roots": [host.slot_root]})]
    result = node.run(argv, timeout_s=60, check=False)
    lines = [ln for ln in result.out.splitlines() if ln.startswith("{")]
    if not result.ok or not lines:
        raise RemoteCommandError(result, "look at the node's other slots after the start")
    return rival(parse_slots(json.loads(lines[-1])["slots"]), host.workdir, gpus)
