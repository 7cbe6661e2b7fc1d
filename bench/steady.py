"""The node's CPU over a long, quiet stretch of a wait (a 30-minute load is mostly this).

The server hangs silently after `Init torch distributed begin.` (FIREDUP_SIM_FAULT=nccl_hang),
so nothing changes and every tool just keeps polling for WINDOW_S seconds: firedup's wait
(1 s tick, ends with NotReadyError at its deadline), the story's loop at 1 s and at 15 s
(ends with TIMEOUT) and Ansible's wait_for (times out). The CPU of everything under our sshd
in that window, as a share of one core. Also per remote command: what one firedup probe and
one `true` cost the node, with a quiet login shell and with this machine's own ~/.bashrc
(Debian's bash reads it for every command sshd runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.latency import new_target
from bench.rig import Rig, node_cpu_s
from bench.tools import Ansible, start_loop
from firedup.errors import DeployError
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.probe import probe_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.readiness.wait import WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import health_url
from tests.conftest import wait_until

WINDOW_S = 12


class WindowOver(Exception):
    """The measuring window ended: stop the wait (not a firedup outcome)."""


HANG = {"FIREDUP_SIM_SPEED": "2", "FIREDUP_SIM_FAULT": "nccl_hang"}


@dataclass
class SteadySample:
    tool: str
    login_shell: str
    window_s: float
    node_cpu_s: float
    outcome: str

    @property
    def node_cpu_pct(self) -> float:
        return 100.0 * self.node_cpu_s / self.window_s if self.window_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "node_cpu_pct": self.node_cpu_pct}


class Steady:
    def __init__(self, rig: Rig, ansible: Ansible | None) -> None:
        self.rig = rig
        self.ansible = ansible
        self.shell = "quiet ~/.bashrc" if rig.quiet_home else "this machine's ~/.bashrc"

    def _hung(self) -> tuple[SshNode, RunMeta]:
        target = new_target(self.rig, "steady", **HANG)
        node = SshNode(target.spec)
        run = start_plan(node, plan_deploy(target.spec, target.deployment))
        log = Path(run.log_path)  # the window must be quiet: wait for the silent phase

        def silent() -> bool:
            return log.exists() and b"Init torch distributed begin" in log.read_bytes()

        wait_until(silent, 30, "the hang to begin")
        return node, run

    def _window(self, tool: str, watch: Callable[[SshNode, RunMeta], str]) -> SteadySample:
        node, run = self._hung()
        cpu0, t0 = node_cpu_s(self.rig.sshd_pid), time.monotonic()
        try:
            outcome = watch(node, run)
            wall, cpu = time.monotonic() - t0, node_cpu_s(self.rig.sshd_pid) - cpu0
        finally:
            stop_run(node, run, grace_s=2)
            node.close()
        return SteadySample(tool, self.shell, wall, cpu, outcome)

    def firedup(self) -> SteadySample:
        def watch(node: SshNode, run: RunMeta) -> str:
            # The deploy's own deadline (1800 s, what `fab deploy` uses), so the looks are
            # spaced as in a real wait; the window is ended from the guard hook instead.
            ends = time.monotonic() + WINDOW_S

            def guard() -> None:
                if time.monotonic() >= ends:
                    raise WindowOver

            try:
                wait_ready(
                    node, run, WaitOptions(timeout_s=1800, tick_s=1.0), WaitHooks(guard=guard)
                )
                return "READY?"
            except WindowOver:
                return "still waiting (window over)"
            except DeployError as exc:
                return type(exc).__name__

        return self._window("firedup", watch)

    def loop(self, interval_s: float) -> SteadySample:
        def watch(_node: SshNode, run: RunMeta) -> str:
            lines = start_loop(self.rig, interval_s, 0, WINDOW_S, run.log_path)
            lines.wait(WINDOW_S + 30)
            return lines.lines[-1][1] if lines.lines else "?"

        return self._window(f"loop {interval_s:g}s", watch)

    def ansible_wait(self) -> SteadySample:
        assert self.ansible is not None
        ansible = self.ansible

        def watch(_node: SshNode, run: RunMeta) -> str:
            lines = ansible.start("wait.yml", {"log": run.log_path, "wait_timeout": WINDOW_S})
            lines.wait(WINDOW_S + 60)
            return "timed out" if lines.first("fatal: [node]") else "?"

        return self._window("ansible wait_for", watch)

    def per_command(self, count: int = 20) -> dict[str, float]:
        """Node CPU milliseconds of one firedup probe (with health) and of one `true`."""
        node, run = self._hung()
        try:
            out = {}
            for label, call in (
                (
                    "probe_ms",
                    lambda: probe_run(
                        node, run.rundir, run.port, 0, max_bytes=65536, health_url=health_url(run)
                    ),
                ),
                ("true_ms", lambda: node.run(["true"])),
            ):
                cpu0 = node_cpu_s(self.rig.sshd_pid)
                for _ in range(count):
                    call()
                out[label] = 1000 * (node_cpu_s(self.rig.sshd_pid) - cpu0) / count
            return out
        finally:
            stop_run(node, run, grace_s=2)
            node.close()


def run_steady(
    rig: Rig, ansible: Ansible | None, tools: list[str], log: Callable[[str], None]
) -> tuple[list[SteadySample], dict[str, float]]:
    bench = Steady(rig, ansible)
    measures: dict[str, Callable[[], SteadySample]] = {
        "firedup": bench.firedup,
        "loop 1s": lambda: bench.loop(1),
        "loop 15s": lambda: bench.loop(15),
    }
    if ansible is not None:
        measures["ansible wait_for"] = bench.ansible_wait
    samples = []
    for name in tools:
        if name in measures:
            s = measures[name]()
            samples.append(s)
            log(
                f"  {s.tool:16s} [{s.login_shell}] node cpu {s.node_cpu_pct:5.2f}% of one core "
                f"over {s.window_s:.1f}s  ({s.outcome})"
            )
    per_command = bench.per_command()
    log(
        f"  per command [{bench.shell}]: firedup probe {per_command['probe_ms']:.1f} ms, "
        f"`true` {per_command['true_ms']:.1f} ms of node CPU"
    )
    return samples, per_command
