"""Which GPUs of a node a deployment runs on (pure): the listed ones, CUDA_VISIBLE_DEVICES, or
for `gpus: auto` the freest that fit, preferring sets joined by NVLink and on one NUMA node.

Who holds each GPU comes from nvidia-smi's compute processes: ours (the run a restart
replaces), another slot of ours (its run recorded its GPUs), or anyone else's (pid, user).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import combinations
from math import comb

from firedup.config.slots import gpu_request, spell_gpus
from firedup.preflight.facts import Gpu, GpuApp
from firedup.preflight.sharing import OtherSlot, link_rank
from firedup.preflight.situation import Situation

MAX_SETS = 5000  # past this many candidate sets, take the freest GPUs without ranking sets


@dataclass(frozen=True)
class GpuChoice:
    gpus: tuple[int, ...]  # node indices, in the order CUDA will number them
    why: str
    auto: bool = False
    short: str = ""  # auto found too few: why


def per_node(s: Situation) -> int:
    return -(-s.deployment.tp // s.deployment.nnodes)


def live_slots(s: Situation) -> tuple[OtherSlot, ...]:
    return tuple(o for o in s.facts.share.slots if o.alive)


def slot_of_gpu(s: Situation) -> dict[int, OtherSlot]:
    """GPU index -> the live slot of ours using it (its recorded set, or its processes)."""
    held: dict[int, OtherSlot] = {}
    for other in live_slots(s):
        for app in s.facts.gpu_apps:
            index = s.facts.gpu_index(app.gpu_uuid)
            if app.sid == other.pid and index is not None:
                held.setdefault(index, other)
        for index in other.gpus or ():
            held.setdefault(index, other)
    return held


def foreign_apps(s: Situation) -> dict[int, list[GpuApp]]:
    """GPU index -> compute processes neither of the run a restart replaces nor of a live
    slot of ours: someone else's."""
    mine = {s.our_sid} if s.restart and s.our_sid is not None else set()
    slot_sids = {o.pid for o in live_slots(s)}
    out: dict[int, list[GpuApp]] = {}
    for app in s.facts.gpu_apps:
        index = s.facts.gpu_index(app.gpu_uuid)
        if index is None or app.sid in mine | slot_sids:
            continue
        out.setdefault(index, []).append(app)
    return out


def describe_app(app: GpuApp) -> str:
    return f"pid {app.pid} ({app.name}, user {app.user or '?'}, {app.used_mib / 1024:.1f} GiB)"


def grouped(items: list[tuple[int, str]]) -> str:
    """`GPUs 0,1: what; GPU 5: other`: GPUs that share a description are named together."""
    by_text: dict[str, list[int]] = {}
    for index, text in items:
        by_text.setdefault(text, []).append(index)
    return "; ".join(
        f"GPU{'s' if len(ix) > 1 else ''} {spell_gpus(tuple(ix))}: {text}"
        for text, ix in by_text.items()
    )


def _fits(s: Situation, gpu: Gpu) -> bool:
    fraction = s.deployment.mem_fraction
    return fraction is None or gpu.free_mib >= fraction * gpu.total_mib


def _set_score(s: Situation, gpus: tuple[Gpu, ...]) -> tuple[int, int, float, tuple[int, ...]]:
    """Higher is better: the weakest link between any two, one NUMA node, free memory, then
    the lowest indices (a stable choice)."""
    topo = s.facts.share.topology
    pairs = [link_rank(topo.link(a.index, b.index)) for a, b in combinations(gpus, 2)]
    numas = {topo.numa.get(g.index, "?") for g in gpus}
    free = sum(g.free_mib for g in gpus)
    return (min(pairs, default=0), -len(numas), free, tuple(-g.index for g in gpus))


def _auto(s: Situation, n: int) -> GpuChoice:
    gpus = s.gpus_after_restart()
    foreign, slots = foreign_apps(s), slot_of_gpu(s)
    taken: list[tuple[int, str]] = []
    for g in gpus:
        if g.index in slots:
            taken.append((g.index, slots[g.index].label))
        elif g.index in foreign:
            taken.append((g.index, ", ".join(describe_app(a) for a in foreign[g.index])))
        elif not _fits(s, g):
            taken.append((g.index, f"{g.free_mib / 1024:.1f} GiB free"))
    free = [g for g in gpus if g.index not in slots and g.index not in foreign and _fits(s, g)]
    busy = f"; not free: {grouped(taken)}" if taken else ""
    if len(free) < n:
        short = f"{len(free)} of {len(gpus)} GPU(s) free for this deployment, it needs {n}{busy}"
        return GpuChoice(tuple(g.index for g in free), "", auto=True, short=short)
    if comb(len(free), n) > MAX_SETS:
        best = tuple(sorted(sorted(free, key=lambda g: -g.free_mib)[:n], key=lambda g: g.index))
    else:
        best = max(combinations(free, n), key=lambda c: _set_score(s, c))
    return GpuChoice(tuple(g.index for g in best), _why(s, best, len(free)) + busy, auto=True)


def _why(s: Situation, chosen: tuple[Gpu, ...], free: int) -> str:
    topo = s.facts.share.topology
    links = {topo.link(a.index, b.index) for a, b in combinations(chosen, 2)} - {""}
    numas = sorted({topo.numa[g.index] for g in chosen if g.index in topo.numa})
    parts = [f"auto: {len(chosen)} of {free} free GPU(s)"]
    if links:
        parts.append("links " + "/".join(sorted(links, key=link_rank, reverse=True)))
    if len(numas) == 1:
        parts.append(f"one NUMA node ({numas[0]})")
    elif numas:
        parts.append(f"NUMA nodes {','.join(numas)}")
    tight = min(chosen, key=lambda g: g.free_mib)
    parts.append(f"{tight.free_mib / 1024:.0f} GiB free on the tightest")
    return ", ".join(parts)


def choose_gpus(s: Situation, env: Mapping[str, str]) -> GpuChoice | None:
    """The deployment's GPUs on this node (`env`: the launch's, where CUDA_VISIBLE_DEVICES
    may be); None when the node shows no GPUs to choose from."""
    if not s.facts.gpus_available or not s.facts.gpus:
        return None
    n = per_node(s)
    request = gpu_request(s.deployment.gpu_set, env)
    if request == "auto":
        return _auto(s, n)
    if isinstance(request, tuple):
        return GpuChoice(request, f"listed: {spell_gpus(request)}")
    first = tuple(g.index for g in s.facts.gpus[:n])
    return GpuChoice(first, f"the first {n} (no `gpus:`)")


def with_choice(s: Situation, env: Mapping[str, str]) -> Situation:
    choice = choose_gpus(s, env)
    if choice is None:
        return s
    return replace(s, gpus_chosen=choice.gpus, gpus_why=choice.why, gpus_short=choice.short)
