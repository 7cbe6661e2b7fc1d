"""Watching a served model: `fab status` over a slow link, and what `fab top` costs the node.

status: one ready simulated SGLang server, reached through a relay adding 50 ms each way (no
rate limit: a 100 ms round trip), side by side with what the story's loop runs (one `ssh` of
its grep for the ready or an error word, a fresh OpenSSH connection as each of its rounds) and
an Ansible playbook asking the same (bench/ansible/status.yml). For firedup, the time after
connecting (the issue's bound: 2 round trips + 0.3 s) and with the connection, in round trips
of the link as measured on the connection (a global request's reply), and `fab status` as a
user runs it (the CLI: python start-up and imports included), next to the two others' wall
time, whose numbers include their own connects (and Ansible's start-up).

top: `fab top`'s refresh (ops/top.TopHost.refresh: every fact and /metrics in one command)
against the same server over loopback, N refreshes back to back: the node's CPU per refresh
(the command and its children, from the sshd's process tree, and the server's own CPU to
answer /metrics and /server_info, over an idle window of the same length), and as a share of
one core at top's default interval.

    .venv/bin/python -m bench --only status,top
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.latency import Target, new_target
from bench.report import fmt, median, table
from bench.rig import Rig, node_cpu_s
from bench.tools import Ansible
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.ops.status import RunState, host_status
from firedup.ops.top import TopHost
from firedup.readiness.shipping import FACTS, bundle_arg
from firedup.readiness.wait import WaitOptions, wait_ready
from tasks.top import INTERVAL_S
from tests.conftest import SIM_MODELS, fab
from tests.slowlink import SlowLink, round_trip_s

DELAY_S = 0.05
MODEL = str(SIM_MODELS / "tiny-llama")  # bench.latency.new_target's
LOOP_CHECK = (
    "grep -aqF 'fired up and ready to roll' {log} && echo READY "
    "|| grep -aoE -m1 'Traceback|Error|error|FAILED' {log}"
)  # bench/loops/story_loop.sh's round, one of them


@dataclass
class StatusSample:
    tool: str
    wall_s: float
    round_trip_s: float
    after_connect_s: float | None = None
    ok: bool = True


class Served:
    """A ready simulated server on the rig, and a relay to its sshd."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.target: Target = new_target(rig, "status")
        self.node = SshNode(self.target.spec)
        plan = plan_deploy(self.target.spec, self.target.deployment)
        self.run: RunMeta = start_plan(self.node, plan)
        wait_ready(self.node, self.run, WaitOptions(timeout_s=60, tick_s=1.0))
        self.relay = SlowLink(rig.sshd.port, delay_s=DELAY_S)
        rig.trust_port(self.relay.port)
        self.spec = self.target.spec.model_copy(update={"port": self.relay.port})

    def close(self) -> None:
        stop_run(self.node, self.run, grace_s=2)
        self.node.close()
        self.relay.close()


def _firedup(served: Served) -> StatusSample:
    bundle_arg(FACTS)  # built once per install, then read from the operator's cache
    node = SshNode(served.spec)
    try:
        t0 = time.monotonic()
        node._conn.open()
        t1 = time.monotonic()
        status = host_status(node, served.spec, served.target.deployment)
        t2 = time.monotonic()
        rtt = round_trip_s(node._conn.client.get_transport())
    finally:
        node.close()
    return StatusSample("firedup", t2 - t0, rtt, t2 - t1, status.state is RunState.READY)


def _cli(served: Served, rtt: float) -> StatusSample:
    workdir = served.target.workdir
    host = served.rig.host_entry(workdir, "d")
    host["port"] = served.relay.port
    deployment = {"engine": "sglang", "model": MODEL, "port": served.target.deployment.port}
    _, inventory = served.rig.inventory(workdir, {"n": host}, {"d": deployment})
    t0 = time.monotonic()
    result = fab("status", "--host", "n", "--inventory", str(inventory))
    return StatusSample("fab status (CLI)", time.monotonic() - t0, rtt, ok=result.returncode == 0)


def _loop(served: Served, rtt: float) -> StatusSample:
    check = LOOP_CHECK.format(log=served.run.log_path)
    t0 = time.monotonic()
    done = subprocess.run(
        [*served.rig.ssh_argv(served.relay.port), check], capture_output=True, text=True
    )
    wall = time.monotonic() - t0
    return StatusSample("story loop's round (ssh + grep)", wall, rtt, ok="READY" in done.stdout)


def _ansible(served: Served, ansible: Ansible, rtt: float) -> StatusSample:
    t0 = time.monotonic()
    lines = ansible.start("status.yml", {"log": served.run.log_path}, port=served.relay.port)
    lines.wait(120)
    wall = time.monotonic() - t0
    ok = lines.first("ok: [node]") is not None
    return StatusSample("Ansible playbook (status.yml)", wall, rtt, ok=ok)


def run_status(
    rig: Rig, ansible: Ansible | None, repeats: int, log: Callable[[str], None]
) -> list[StatusSample]:
    served = Served(rig)
    samples: list[StatusSample] = []
    try:
        for _ in range(repeats):
            own = _firedup(served)
            rtt = own.round_trip_s
            round_ = [own, _cli(served, rtt), _loop(served, rtt)]
            if ansible is not None:
                round_.append(_ansible(served, ansible, rtt))
            for s in round_:
                samples.append(s)
                after = (
                    ""
                    if s.after_connect_s is None
                    else f" (after connect {s.after_connect_s:.3f} s)"
                )
                log(f"  {s.tool:32s} {s.wall_s:6.3f} s{after}, rtt {s.round_trip_s:.3f}, ok {s.ok}")
    finally:
        served.close()
    return samples


def render_status(samples: list[dict[str, Any]]) -> str:
    rows = []
    for tool in dict.fromkeys(s["tool"] for s in samples):
        runs = [s for s in samples if s["tool"] == tool]
        rtt = median(s["round_trip_s"] for s in runs) or 0.1
        wall = median(s["wall_s"] for s in runs) or 0.0
        after = [s["after_connect_s"] for s in runs if s["after_connect_s"] is not None]
        after_s = median(after) if after else None
        rows.append(
            [
                tool,
                fmt(wall, " s", 3) + f" ({wall / rtt:.1f} round trips)",
                fmt(after_s, " s", 3) + (f" ({after_s / rtt:.1f} round trips)" if after_s else ""),
                f"{2 * rtt + 0.3:.3f} s" if after_s else "—",
                f"{sum(1 for s in runs if s['ok'])}/{len(runs)}",
            ]
        )
    headers = ["tool", "wall (median)", "after connecting", "bound (2 RTT + 0.3 s)", "ok"]
    return table(headers, rows)


@dataclass
class TopSample:
    refreshes: int
    window_s: float
    session_cpu_s: float
    server_cpu_s: float
    idle_server_cpu_s: float

    @property
    def per_refresh_ms(self) -> float:
        extra = max(0.0, self.server_cpu_s - self.idle_server_cpu_s)
        return 1000 * (self.session_cpu_s + extra) / self.refreshes


def _server_cpu(run: RunMeta) -> float:
    return node_cpu_s(run.pid) if run.pid and Path(f"/proc/{run.pid}").exists() else 0.0


def run_top(rig: Rig, refreshes: int, repeats: int, log: Callable[[str], None]) -> list[TopSample]:
    served = Served(rig)
    top = TopHost(served.target.spec, served.target.deployment)
    samples = []
    try:
        top.refresh(served.node)  # connected, bundle built: what every later refresh reuses
        for _ in range(repeats):
            cpu0, srv0, t0 = node_cpu_s(rig.sshd_pid), _server_cpu(served.run), time.monotonic()
            for _ in range(refreshes):
                top.refresh(served.node)
            window = time.monotonic() - t0
            cpu1, srv1 = node_cpu_s(rig.sshd_pid), _server_cpu(served.run)
            time.sleep(window)  # the server's own CPU when nobody asks it anything
            idle = _server_cpu(served.run) - srv1
            s = TopSample(refreshes, window, cpu1 - cpu0, srv1 - srv0, idle)
            samples.append(s)
            log(f"  {refreshes} refreshes in {window:.2f} s: {s.per_refresh_ms:.1f} ms node CPU")
    finally:
        served.close()
    return samples


def render_top(samples: list[dict[str, Any]]) -> str:
    rows = []
    for s in samples:
        extra = max(0.0, s["server_cpu_s"] - s["idle_server_cpu_s"])
        per = 1000 * (s["session_cpu_s"] + extra) / s["refreshes"]
        rows.append(
            [
                str(s["refreshes"]),
                fmt(s["window_s"], " s", 2),
                fmt(1000 * s["session_cpu_s"] / s["refreshes"], " ms", 1),
                fmt(1000 * extra / s["refreshes"], " ms", 1),
                fmt(per, " ms", 1),
                fmt(per / 10 / INTERVAL_S, "%", 2),
            ]
        )
    headers = [
        "refreshes",
        "window",
        "command CPU / refresh",
        "server CPU / refresh (over idle)",
        "node CPU / refresh",
        f"share of a core at --interval {INTERVAL_S:g} s",
    ]
    return table(headers, rows)
