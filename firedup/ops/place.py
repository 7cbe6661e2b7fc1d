"""`fab place`: which hosts (and which of their GPUs) could take a deployment right now, and
why the others cannot. Read-only: preflight's facts and checks, judged for a new slot.

Each host is judged as if the deployment went into a new slot of that host's node workdir:
what already runs there (the host's own run included) keeps running and keeps its GPUs and
ports. A deployment that names no GPUs is placed as `gpus: auto`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from firedup.config.inventory import Deployment, HostSpec
from firedup.config.slots import gpu_request, slot_workdir, spell_gpus
from firedup.errors import StartError, TransientConnectError
from firedup.launch.render import launch_env
from firedup.launch.runs import RunMeta, current_run, stop_run
from firedup.node.base import Node
from firedup.preflight import preflight
from firedup.preflight.claim import claim_rival
from firedup.preflight.model import Check
from firedup.preflight.sharing import OtherSlot

Progress = Callable[[str], None]
PROBE_SLOT = "place-probe"  # never created: the judged slot only has to differ from all others


@dataclass(frozen=True)
class Fit:
    host: str
    gpus: tuple[int, ...] | None
    why: str  # why these GPUs
    failures: tuple[Check, ...]  # why not

    @property
    def fits(self) -> bool:
        return not self.failures

    def row(self) -> list[str]:
        if self.fits:
            return [self.host, "yes", spell_gpus(self.gpus or ()) or "-", self.why]
        reasons = "; ".join(f"{c.name}: {c.detail}" for c in self.failures)
        return [self.host, "no", "-", reasons]

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "fits": self.fits,
            "gpus": list(self.gpus) if self.gpus is not None and self.fits else None,
            "why": self.why if self.fits else "",
            "failures": [{"check": c.name, "detail": c.detail} for c in self.failures],
        }


def as_placed(host: HostSpec, deployment: Deployment) -> tuple[HostSpec, Deployment]:
    """The host as a new slot of its node workdir, the deployment as `gpus: auto` unless it
    names its GPUs (pure; the copies are never written anywhere)."""
    probe = host.model_copy(
        update={"slot": PROBE_SLOT, "workdir": slot_workdir(host.slot_root, PROBE_SLOT)}
    )
    if gpu_request(deployment.gpu_set, launch_env(host, deployment)) is None:
        deployment = deployment.model_copy(update={"gpus": "auto"})
    return probe, deployment


def place_on(node: Node, host: HostSpec, deployment: Deployment) -> Fit:
    probe, placed = as_placed(host, deployment)
    report = preflight(node, probe, placed, current=None)
    return Fit(host.name, report.gpus, report.gpus_why, report.failures)


def auto_gpus(
    node: Node, host: HostSpec, deployment: Deployment, *, restart: bool
) -> tuple[int, ...] | None:
    """`gpus: auto` without a deploy (`fab start`): the GPUs are still chosen from the node's
    facts; the other checks are not applied (start is the step without preflight)."""
    if deployment.gpus != "auto":
        return None
    report = preflight(node, host, deployment, current=current_run(node, host), restart=restart)
    problem = next((c for c in report.failures if c.name == "gpu set"), None)
    if problem is not None or report.gpus is None:
        detail = problem.detail if problem else "the node lists no GPUs"
        raise StartError(f"{host.name}: gpus: auto: {detail}; nothing was started")
    return report.gpus


def _rival_once_more(node: Node, host: HostSpec, gpus: tuple[int, ...]) -> OtherSlot | None:
    try:
        return claim_rival(node, host, gpus)
    except TransientConnectError:
        return claim_rival(node, host, gpus)  # the node reconnects for the second look


def give_way(node: Node, host: HostSpec, run: RunMeta, on_progress: Progress) -> None:
    """A run that started just after another slot's took an overlapping GPU set (both passed
    preflight at once) is stopped again and refused (firedup.preflight.claim)."""
    if run.gpus is None:
        return
    try:
        other = _rival_once_more(node, host, run.gpus)
    except TransientConnectError as exc:  # the server runs: the wait goes on and reconnects
        on_progress(
            f"could not look at the node's other slots after the start ({exc}); run "
            f"{run.run_id} is running: `fab status` shows what else uses GPUs "
            f"{spell_gpus(run.gpus)}"
        )
        return
    if other is None:
        return
    on_progress(f"GPUs {spell_gpus(run.gpus)} were taken a moment earlier by {other.label}")
    try:
        stop_run(node, run, grace_s=5)
        fate = "was stopped again"
    except TransientConnectError as exc:
        fate = f"may still be running: the connection dropped while stopping it ({exc})"
    shared = spell_gpus(tuple(sorted(set(run.gpus) & set(other.gpus or ()))))
    raise StartError(
        f"{host.name}: GPUs {shared} are used by {other.label}, started a moment before this "
        f"run; run {run.run_id} {fate}",
        hint="give the deployments GPU sets that do not overlap ('gpus: auto' avoids them)",
    )
