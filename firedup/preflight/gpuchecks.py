"""Preflight checks of a shared node: the GPU set, other users on it, our other slots (pure)."""

from __future__ import annotations

from firedup.config.slots import spell_gpus
from firedup.preflight.gpuchoice import describe_app, foreign_apps, grouped, per_node, slot_of_gpu
from firedup.preflight.model import Check, failed, passed
from firedup.preflight.situation import Situation

PLACE_HINT = "`fab place --deployment NAME --host HOST` shows which GPUs could take it"


def check_gpu_set(s: Situation) -> Check:
    chosen = s.gpus_chosen
    if chosen is None:
        return passed("gpu set", "not chosen: no GPU listed by the node")
    if s.gpus_short:
        return failed(
            "gpu set",
            f"gpus: auto found too few: {s.gpus_short}",
            "free GPUs (stop what holds them), lower 'tp', or pick another node; "
            + PLACE_HINT.replace("NAME", s.deployment.name or "D"),
        )
    known = {g.index for g in s.facts.gpus}
    missing = [i for i in chosen if i not in known]
    if missing:
        return failed(
            "gpu set",
            f"GPU(s) {spell_gpus(tuple(missing))} are not on this node "
            f"(it has {spell_gpus(tuple(sorted(known)))})",
            "fix 'gpus' (or CUDA_VISIBLE_DEVICES) in the deployment, or write 'gpus: auto'",
        )
    if len(chosen) < per_node(s):
        return failed(
            "gpu set",
            f"{len(chosen)} GPU(s) visible ({spell_gpus(chosen)}), tp={s.deployment.tp} "
            f"needs {per_node(s)} per node",
            "list as many GPUs as the node's share of 'tp'",
        )
    return passed("gpu set", f"GPUs {spell_gpus(chosen)} ({s.gpus_why})")


def check_gpu_users(s: Situation) -> Check:
    """Another user's (or an unknown) process on a chosen GPU: the launch would share it."""
    if not s.gpus_chosen or s.gpus_short:
        return passed("gpu users", "no GPU set to judge")
    foreign = foreign_apps(s)
    found = [
        (index, ", ".join(describe_app(a) for a in foreign[index]))
        for index in s.gpus_chosen
        if index in foreign
    ]
    if found:
        return failed(
            "gpu users",
            "other processes on the chosen GPUs: " + grouped(found),
            "pick other GPUs ('gpus: auto' takes free ones; "
            + PLACE_HINT.replace("NAME", s.deployment.name or "D")
            + "), or ask the owner to free them",
        )
    return passed("gpu users", f"no other process on GPUs {spell_gpus(s.gpus_chosen)}")


def check_slots(s: Situation) -> Check:
    """Our other slots on this node: a live one using a chosen GPU refuses the launch."""
    if not s.gpus_chosen:
        return passed("slots", "no GPU set to judge")
    held = slot_of_gpu(s)
    clash: dict[str, list[int]] = {}
    for index in s.gpus_chosen:
        if index in held:
            clash.setdefault(held[index].label, []).append(index)
    if clash:
        named = "; ".join(f"GPUs {spell_gpus(tuple(g))} are used by {k}" for k, g in clash.items())
        return failed(
            "slots",
            f"GPU set {spell_gpus(s.gpus_chosen)} overlaps a live deployment of ours: {named}",
            "give the deployments GPU sets that do not overlap ('gpus: auto' avoids them), or "
            "stop the other slot first",
        )
    live = [o for o in s.facts.share.slots if o.alive]
    if live:
        return passed(
            "slots",
            f"{len(live)} other live slot(s) on this node, "
            f"none on GPUs {spell_gpus(s.gpus_chosen)}",
        )
    return passed("slots", "no other live slot of ours on this node")
