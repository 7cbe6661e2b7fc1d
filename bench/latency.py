"""Detection latency: from the moment the simulator records ready (or a crash) to the moment a
tool reports it; and the node's CPU while the tool waits.

firedup is measured through its core API (`start_plan`, then `wait_ready` over an `SshNode`
with the CLI's default 1 s tick). The story's loop and Ansible's `wait_for` watch a server
that the bench starts with firedup's `start_plan` (the same launch, the same log path).
The node CPU window of every tool runs from the moment the server was started to the report.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.rig import Rig, node_cpu_s, read_event
from bench.tools import Ansible, start_loop
from firedup.config.inventory import Deployment, HostSpec
from firedup.errors import DeployError
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.readiness.wait import WaitOptions, wait_ready
from tests.conftest import SIM_MODELS, free_port

READY_SPEED = "0.5"  # tiny-llama reaches "fired up" about 3.5 s after launch
TICK_S = 1.0  # `fab deploy`'s default --poll


@dataclass(frozen=True)
class Target:
    """One launch's host: a fresh workdir, port and sim events file."""

    spec: HostSpec
    deployment: Deployment
    workdir: Path
    events: Path


def new_target(rig: Rig, label: str, python: str | None = None, **env: str) -> Target:
    workdir = rig.fresh_dir(label)
    events = workdir / "sim-events.jsonl"
    host = rig.host_entry(workdir, "d", FIREDUP_SIM_EVENTS=str(events), **env)
    if python:
        host["python"] = python
    deployment = {"engine": "sglang", "model": str(SIM_MODELS / "tiny-llama"), "port": free_port()}
    inv, _ = rig.inventory(workdir, {"n": host}, {"d": deployment})
    spec = inv.host("n")
    return Target(spec, inv.deployment_for(spec), workdir, events)


@dataclass
class Sample:
    tool: str
    case: str
    latency_s: float | None  # None: the tool never reported the event
    outcome: str
    window_s: float
    node_cpu_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def node_cpu_pct(self) -> float:
        return 100.0 * self.node_cpu_s / self.window_s if self.window_s > 0 else 0.0


EVENT = {"ready": "ready", "crash": "crashed"}


def _env(case: str) -> dict[str, str]:
    env = {"FIREDUP_SIM_SPEED": READY_SPEED}
    if case == "crash":
        env["FIREDUP_SIM_FAULT"] = "oom_load"
    return env


class Latency:
    """Runs the three tools on fresh launches of one case ("ready" or "crash")."""

    def __init__(self, rig: Rig, ansible: Ansible | None) -> None:
        self.rig = rig
        self.ansible = ansible

    def _launch(self, case: str, node: SshNode | None = None) -> tuple[Target, SshNode, RunMeta]:
        target = new_target(self.rig, f"lat-{case}", **_env(case))
        node = node or SshNode(target.spec)
        run = start_plan(node, plan_deploy(target.spec, target.deployment))
        return target, node, run

    def _sample(
        self, tool: str, case: str, target: Target, run: RunMeta, reported: float | None, **kw: Any
    ) -> Sample:
        event = read_event(target.events, EVENT[case], run.pid)
        latency = reported - event if reported is not None and event is not None else None
        return Sample(tool, case, latency, **kw)

    def firedup(self, case: str) -> Sample:
        target, node, run = self._launch(case)
        cpu0, t0 = node_cpu_s(self.rig.sshd_pid), time.time()
        try:
            wait_ready(node, run, WaitOptions(timeout_s=60, tick_s=TICK_S))
            outcome = "READY"
        except DeployError as exc:
            outcome = f"{type(exc).__name__}"
        reported = time.time()
        cpu = node_cpu_s(self.rig.sshd_pid) - cpu0
        try:
            return self._sample(
                "firedup",
                case,
                target,
                run,
                reported,
                outcome=outcome,
                window_s=reported - t0,
                node_cpu_s=cpu,
            )
        finally:
            stop_run(node, run, grace_s=2)
            node.close()

    def loop(self, case: str, interval_s: float, phase: float) -> Sample:
        target, node, run = self._launch(case)
        cpu0, t0 = node_cpu_s(self.rig.sshd_pid), time.time()
        timeout = 60 if interval_s < 5 else 90
        lines = start_loop(self.rig, interval_s, phase * interval_s, timeout, run.log_path)
        lines.wait(timeout + 30)
        cpu = node_cpu_s(self.rig.sshd_pid) - cpu0
        first = lines.first("READY", "FAILED", "TIMEOUT")
        reported = first[0] if first and first[1] != "TIMEOUT" else None
        outcome = first[1] if first else "no output"
        end = first[0] if first else time.time()
        try:
            return self._sample(
                f"loop {interval_s:g}s",
                case,
                target,
                run,
                reported,
                outcome=outcome,
                window_s=end - t0,
                node_cpu_s=cpu,
            )
        finally:
            stop_run(node, run, grace_s=2)
            node.close()

    def ansible_wait(self, case: str, timeout_s: int) -> Sample:
        assert self.ansible is not None
        target = new_target(self.rig, f"lat-{case}", **_env(case))
        node = SshNode(target.spec)
        plan = plan_deploy(target.spec, target.deployment)
        log = f"{plan.rundir}/server.log"
        lines = self.ansible.start("wait.yml", {"log": log, "wait_timeout": timeout_s})
        self.ansible.wait_module_running()
        run = start_plan(node, plan)
        cpu0, t0 = node_cpu_s(self.rig.sshd_pid), time.time()
        lines.wait(timeout_s + 60)
        cpu = node_cpu_s(self.rig.sshd_pid) - cpu0
        ok, fatal = lines.first("ok: [node]"), lines.first("fatal: [node]")
        reported = ok[0] if ok else None
        outcome = "READY" if ok else ("timed out" if fatal else "no result")
        end = (ok or fatal or (time.time(), ""))[0]
        try:
            return self._sample(
                "ansible wait_for",
                case,
                target,
                run,
                reported,
                outcome=outcome,
                window_s=end - t0,
                node_cpu_s=cpu,
            )
        finally:
            stop_run(node, run, grace_s=2)
            node.close()


def phases(n: int, seed: int) -> list[float]:
    """n loop phases spread over one interval (stratified), in a shuffled order."""
    values = [(i + 0.5) / n for i in range(n)]
    random.Random(seed).shuffle(values)
    return values


def run_latency(
    rig: Rig, ansible: Ansible | None, repeats: int, log: Callable[[str], None]
) -> list[Sample]:
    bench = Latency(rig, ansible)
    samples: list[Sample] = []

    def keep(sample: Sample) -> None:
        samples.append(sample)
        lat = "never" if sample.latency_s is None else f"{sample.latency_s:+.2f}s"
        log(
            f"  {sample.case:5s} {sample.tool:16s} {lat:>8s}  {sample.outcome:24s} "
            f"node cpu {sample.node_cpu_pct:.2f}% of {sample.window_s:.1f}s"
        )

    for case in ("ready", "crash"):
        for _ in range(repeats):
            keep(bench.firedup(case))
        for phase in phases(repeats, 1):
            keep(bench.loop(case, 1, phase))
        for phase in phases(max(2, (repeats + 1) // 2), 15):
            keep(bench.loop(case, 15, phase))
        if ansible is not None:
            runs = repeats if case == "ready" else 1
            for _ in range(runs):
                keep(bench.ansible_wait(case, 60 if case == "ready" else 15))
    return samples
