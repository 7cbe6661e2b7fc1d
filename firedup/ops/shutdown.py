"""Stopping a run, and proving it stopped: no process of the run left, its GPU memory free.

The stop itself is by process group then by pid (firedup/node/sh/stop.sh), never by name; the
proof looks at the run's session on the node and at nvidia-smi's compute apps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import DeployError, RouterError, SlotTakenError, StartError
from firedup.launch.gpus import gpu_apps
from firedup.launch.keepalive import end_watch
from firedup.launch.runs import STOP_GRACE_S, RunMeta, StopReport, current_run, stop_run
from firedup.node.base import Node
from firedup.node.lock import node_lock, waiting_holder
from firedup.ops.handoff import handoff_of, leave
from firedup.ops.history import Action, Outcome, append_history, run_record
from firedup.ops.repo import inventory_commit

GPU_RELEASE_S = 15.0  # the driver frees memory a moment after the process is reaped


@dataclass(frozen=True)
class StopOutcome:
    host: str
    run: RunMeta | None
    report: StopReport | None
    still_on_gpu: tuple[int, ...] = ()  # pids of the run nvidia-smi still lists
    gpu_checked: bool = False
    unrecorded: tuple[str, ...] = ()  # what could not be written down (a full disk), and why
    router: str = ""  # what the router hand-off did first (docs/router.md)

    def text(self) -> str:
        if self.run is None or self.report is None:
            return f"{self.host}: nothing was started here"
        extra = ""
        if self.report.killed:
            extra += f"; KILLed {len(self.report.killed)} that ignored TERM"
        if self.gpu_checked:
            extra += "; GPU memory released"
        if self.report.reused:
            extra += f" (pid {self.report.reused} now belongs to another process: not signalled)"
        for what in self.unrecorded:
            extra += f"; not recorded: {what}"
        if self.router:
            extra += f"; {self.router}"
        return f"{self.host}: run {self.run.run_id} {self.report.state}{extra}"


def _still_on_gpu(
    node: Node, host: HostSpec, deployment: Deployment, pids: tuple[int, ...]
) -> tuple[tuple[int, ...], bool]:
    deadline = time.monotonic() + GPU_RELEASE_S
    while True:
        apps = gpu_apps(node, host, deployment)
        if apps is None:
            return (), False
        held = tuple(sorted({a.pid for a in apps} & set(pids)))
        if not held or time.monotonic() > deadline:
            return held, True
        time.sleep(0.5)


def _leave_router(
    node: Node, host: HostSpec, deployment: Deployment, on_progress: Callable[[str], None]
) -> str:
    """Out of the router and drained before the stop; a router that cannot be reached does
    not keep a server running (its own health checks drop a dead worker): said, not raised."""
    handoff = handoff_of(node, host, deployment)
    if handoff is None:
        return ""
    try:
        return leave(handoff, on_progress).text()
    except RouterError as exc:
        on_progress(f"router: {exc.message}; stopping anyway")
        return f"router not told: {exc.message}"


def stop_host(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    *,
    grace_s: int = STOP_GRACE_S,
    force_unlock: bool = False,
    force: bool = False,
    on_progress: Callable[[str], None] = lambda _m: None,
) -> StopOutcome:
    """Stop the current run under the node's lock, confirm, and record it in the history.

    Needs no free disk: on a full one the lock holds without its record and the history line
    is not written; the outcome says both (`unrecorded`). A deploy that only waits for its
    server does not keep the lock from a stop: it is taken over.

    The run in the host's slot (node and workdir) may have been started by another host
    entry sharing it: that one is stopped only with `force`.

    The slot's watch is ended first (it finishes a restart under way), so nothing brings the
    stopped server back."""
    if end_watch(node, host) == "ended":
        on_progress("ended the watch")
    waiting = None if force_unlock else waiting_holder(node, host)
    if waiting is not None:
        on_progress(f"taking the lock over from {waiting.describe()}: it only waits")
    take_over = force_unlock or waiting is not None
    with node_lock(node, host, "stop", force=take_over, on_progress=on_progress) as lock:
        unrecorded = [f"the lock's record ({lock.warning})"] if lock.warning else []
        run = current_run(node, host)
        if run is None:
            return StopOutcome(host.name, None, None)
        if run.host != host.name and not force:
            raise SlotTakenError(
                f"{host.name}: the run on this node and workdir ({host.workdir}) is "
                f"{run.host}'s: run {run.run_id} of deployment {run.deployment}, not "
                f"{host.deployment}; refusing to stop another host's deployment",
                hint=f"`fab stop --host {run.host}` stops it; or add --force",
            )
        routed = _leave_router(node, host, deployment, on_progress)
        on_progress(f"stopping run {run.run_id} (pid {run.pid})")
        report = stop_run(node, run, grace_s=grace_s)
        if report.left:
            raise StartError(
                f"{host.name}: processes {report.left} of run {run.run_id} survived KILL"
            )
        held, checked = _still_on_gpu(node, host, deployment, report.members)
        if held:
            raise StartError(
                f"{host.name}: run {run.run_id} stopped, but nvidia-smi still "
                f"lists its pids {held} holding GPU memory"
            )
        if report.state == "stopped":
            entry = run_record(
                Action.STOP,
                Outcome.STOPPED,
                run,
                engine_version=run.engine_version or "",
                commit=inventory_commit(host),
            )
            try:
                append_history(node, host, entry)
            except DeployError as exc:
                unrecorded.append(f"the node's history ({exc})")
        return StopOutcome(host.name, run, report, held, checked, tuple(unrecorded), routed)
