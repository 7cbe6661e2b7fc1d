"""End-to-end deploy overhead against an instantly-ready simulated node, and SSH connections.

The node: tiny-llama at FIREDUP_SIM_SPEED=1000 (every simulated duration is ~0; what is left
is process start-up). Four deploys of the same rendered launch script, each timed from the
command's start to its exit, with the server stopped after each run (not timed):
- `fab deploy --host n` (the CLI, as a user runs it: python start-up and imports included);
- firedup's core API in-process (`plan_deploy` + `apply_deploy`, one SshNode);
- bench/loops/deploy.sh: upload with ssh, start detached, ssh + grep + ss every second;
- bench/ansible/deploy.yml: directory, copy, shell (setsid nohup ...), wait_for log, port.
Connections are counted at the sshd ("Accepted publickey"), per deploy.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.latency import Target, new_target
from bench.rig import CountingNode, Rig, node_cpu_s
from bench.tools import LOOPS, Ansible
from firedup.launch.runs import current_run, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import apply_deploy, plan_deploy, wait_options
from tests.conftest import fab

INSTANT = {"FIREDUP_SIM_SPEED": "1000"}


@dataclass
class DeploySample:
    tool: str
    wall_s: float
    ok: bool
    connections: int
    node_cpu_s: float
    remote_ops: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class EndToEnd:
    def __init__(self, rig: Rig, ansible: Ansible | None) -> None:
        self.rig = rig
        self.ansible = ansible
        self.failures: list[str] = []

    def _measure(self, tool: str, target: Target, deploy: Callable[[], Any]) -> DeploySample:
        mark, cpu0, t0 = self.rig.log.mark(), node_cpu_s(self.rig.sshd_pid), time.monotonic()
        result = deploy()
        wall = time.monotonic() - t0
        cpu, conns = node_cpu_s(self.rig.sshd_pid) - cpu0, self.rig.log.accepted_since(mark)
        ok, ops = (result, None) if isinstance(result, bool) else result
        self._stop(target)
        return DeploySample(tool, wall, ok, conns, cpu, ops)

    def _stop(self, target: Target) -> None:
        node = SshNode(target.spec)
        try:
            run = current_run(node, target.spec)
            if run is not None:
                stop_run(node, run, grace_s=2)
            else:  # the hand-written deploys do not write `current`: stop by their pid file
                for rundir in (target.workdir / "runs").glob("*"):
                    pid = (rundir / "pid").read_text().strip()
                    node.run(["kill", "-TERM", "--", f"-{pid}"], check=False)
        finally:
            node.close()

    def fab_cli(self) -> DeploySample:
        target = new_target(self.rig, "e2e-fab", **INSTANT)
        inv = target.workdir / "hosts.yaml"

        def deploy() -> bool:
            result = fab("deploy", "--host", "n", "--inventory", str(inv))
            if result.returncode != 0:
                self.failures.append(f"fab deploy exit {result.returncode}: {result.stderr[-500:]}")
            return result.returncode == 0

        return self._measure("fab deploy (CLI)", target, deploy)

    def core_api(self) -> DeploySample:
        target = new_target(self.rig, "e2e-core", **INSTANT)

        def deploy() -> tuple[bool, int]:
            node = CountingNode(SshNode(target.spec))
            try:
                plan = plan_deploy(target.spec, target.deployment)
                status = apply_deploy(node, plan, wait_options(target.deployment, 60, 1.0))
                return status.ready, sum(node.calls.values())
            finally:
                node.close()

        return self._measure("firedup core API", target, deploy)

    def _script(self, target: Target) -> tuple[str, str]:
        plan = plan_deploy(target.spec, target.deployment)
        local = target.workdir / "launch.sh.local"
        local.write_text(plan.script.text)
        return str(local), plan.rundir

    def bash(self) -> DeploySample:
        target = new_target(self.rig, "e2e-bash", **INSTANT)
        script, rundir = self._script(target)
        port = str(target.deployment.port)
        argv = [str(LOOPS / "deploy.sh"), script, rundir, port, "60", *self.rig.ssh_argv()]

        def deploy() -> bool:
            proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
            return proc.returncode == 0

        return self._measure("bash + ssh script", target, deploy)

    def ansible_playbook(self) -> DeploySample:
        assert self.ansible is not None
        ansible = self.ansible
        target = new_target(self.rig, "e2e-ansible", **INSTANT)
        script, rundir = self._script(target)
        extra = {"launch_script": script, "rundir": rundir, "server_port": target.deployment.port}

        def deploy() -> bool:
            lines = ansible.start("deploy.yml", extra)
            lines.wait(120)
            return lines.proc.returncode == 0

        return self._measure("ansible-playbook", target, deploy)


def run_e2e(
    rig: Rig, ansible: Ansible | None, repeats: int, log: Callable[[str], None]
) -> list[DeploySample]:
    bench = EndToEnd(rig, ansible)
    tools = [bench.fab_cli, bench.core_api, bench.bash]
    if ansible is not None:
        tools.append(bench.ansible_playbook)
    samples = []
    for _ in range(repeats):
        for measure in tools:  # interleaved, so a busy moment of the machine hits them all
            s = measure()
            samples.append(s)
            for failure in bench.failures:
                log(f"  ! {failure}")
            bench.failures.clear()
            log(
                f"  {s.tool:20s} {s.wall_s:6.2f}s  ok={s.ok}  connections={s.connections}  "
                f"node cpu {s.node_cpu_s:.2f}s"
                + (f"  remote ops={s.remote_ops}" if s.remote_ops is not None else "")
            )
    return samples
