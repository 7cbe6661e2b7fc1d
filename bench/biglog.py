"""A wait over a large log: bytes that cross the wire against the log's size, and node CPU.

The noise: the host's `python` is bench/nodeside/noisy-python, which starts a helper writing
BENCH_NOISE_MB of NCCL INFO lines into the run's log (the server's own stdout/stderr: the same
open file, so lines interleave cleanly instead of being overwritten) and then execs the real
python. The engine runs slowly enough (FIREDUP_SIM_SPEED=0.25, about 7 s to ready) that the
noise is all written before the ready line.

Every tool reaches the sshd through a counting relay (tests/slowlink.SlowLink with no rate and
no delay), which counts the bytes on the TCP connection (SSH framing, encryption and window
updates included); firedup's payload (the bytes its Node calls returned) is counted by a
`CountingNode` around its SshNode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.latency import Target, new_target
from bench.rig import CountingNode, Rig, node_cpu_s, read_event
from bench.tools import BENCH, Ansible, start_loop
from firedup.config.inventory import HostSpec
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.readiness.wait import WaitOptions, wait_ready
from tests.slowlink import SlowLink

NOISY_PYTHON = str(BENCH / "nodeside" / "noisy-python")
SPEED = "0.25"


@dataclass
class BigLogSample:
    tool: str
    log_bytes: int
    wire_from_node: int
    wire_to_node: int
    payload_from_node: int | None
    window_s: float
    node_cpu_s: float
    latency_s: float | None
    outcome: str

    @property
    def wire_ratio(self) -> float:
        return self.wire_from_node / self.log_bytes if self.log_bytes else 0.0

    @property
    def node_cpu_pct(self) -> float:
        return 100.0 * self.node_cpu_s / self.window_s if self.window_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "wire_ratio": self.wire_ratio,
            "node_cpu_pct": self.node_cpu_pct,
        }


class BigLog:
    def __init__(self, rig: Rig, ansible: Ansible | None, noise_mb: float) -> None:
        self.rig = rig
        self.ansible = ansible
        self.noise_mb = noise_mb
        self.meter = SlowLink(rig.sshd.port)
        rig.trust_port(self.meter.port)

    def close(self) -> None:
        self.meter.close()

    def _target(self) -> Target:
        env = {"FIREDUP_SIM_SPEED": SPEED, "BENCH_NOISE_MB": str(self.noise_mb)}
        return new_target(self.rig, "biglog", python=NOISY_PYTHON, **env)

    def _via_meter(self, spec: HostSpec) -> HostSpec:
        return spec.model_copy(update={"port": self.meter.port})

    def _finish(
        self,
        tool: str,
        target: Target,
        run: RunMeta,
        start: tuple[float, int, int, float],
        reported: float | None,
        outcome: str,
        payload: int | None,
    ) -> BigLogSample:
        t0, up0, down0, cpu0 = start
        end = reported or time.time()
        up, down = self.meter.snapshot()
        log_bytes = Path(run.log_path).stat().st_size
        event = read_event(target.events, "ready", run.pid)
        latency = reported - event if reported and event else None
        return BigLogSample(
            tool,
            log_bytes,
            down - down0,
            up - up0,
            payload,
            end - t0,
            node_cpu_s(self.rig.sshd_pid) - cpu0,
            latency,
            outcome,
        )

    def _mark(self) -> tuple[float, int, int, float]:
        up, down = self.meter.snapshot()
        return time.time(), up, down, node_cpu_s(self.rig.sshd_pid)

    def firedup(self) -> BigLogSample:
        target = self._target()
        spec = self._via_meter(target.spec)
        node = CountingNode(SshNode(spec))
        run = start_plan(node, plan_deploy(spec, target.deployment))
        start, payload0 = self._mark(), node.bytes_down
        try:
            wait_ready(node, run, WaitOptions(timeout_s=90, tick_s=1.0))
            outcome = "READY"
        except Exception as exc:  # reported, not raised: one bad sample must not end the bench
            outcome = type(exc).__name__
        reported = time.time()
        sample = self._finish(
            "firedup", target, run, start, reported, outcome, node.bytes_down - payload0
        )
        stop_run(node, run, grace_s=2)
        node.close()
        return sample

    def loop(self) -> BigLogSample:
        target = self._target()
        node = SshNode(target.spec)
        run = start_plan(node, plan_deploy(target.spec, target.deployment))
        start = self._mark()
        lines = start_loop(self.rig, 1, 0.5, 90, run.log_path, port=self.meter.port)
        lines.wait(120)
        first = lines.first("READY", "FAILED", "TIMEOUT")
        reported = first[0] if first and first[1] == "READY" else None
        sample = self._finish(
            "loop 1s", target, run, start, reported, first[1] if first else "?", None
        )
        stop_run(node, run, grace_s=2)
        node.close()
        return sample

    def ansible_wait(self) -> BigLogSample:
        assert self.ansible is not None
        target = self._target()
        node = SshNode(target.spec)
        plan = plan_deploy(target.spec, target.deployment)
        extra = {"log": f"{plan.rundir}/server.log", "wait_timeout": 90}
        lines = self.ansible.start("wait.yml", extra, port=self.meter.port)
        self.ansible.wait_module_running()
        run = start_plan(node, plan)
        start = self._mark()
        lines.wait(150)
        ok = lines.first("ok: [node]")
        reported = ok[0] if ok else None
        sample = self._finish(
            "ansible wait_for", target, run, start, reported, "READY" if ok else "no", None
        )
        stop_run(node, run, grace_s=2)
        node.close()
        return sample


def run_biglog(
    rig: Rig, ansible: Ansible | None, noise_mb: float, repeats: int, log: Any
) -> list[BigLogSample]:
    bench = BigLog(rig, ansible, noise_mb)
    samples: list[BigLogSample] = []
    try:
        runs = [bench.firedup] * repeats + [bench.loop]
        if ansible is not None:
            runs.append(bench.ansible_wait)
        for measure in runs:
            s = measure()
            samples.append(s)
            log(
                f"  {s.tool:16s} log {s.log_bytes / 1e6:5.1f} MB  wire from node "
                f"{s.wire_from_node / 1e6:6.2f} MB ({s.wire_ratio:.2f}x)  node cpu "
                f"{s.node_cpu_pct:5.2f}% of {s.window_s:.1f}s  {s.outcome}"
            )
    finally:
        bench.close()
    return samples
