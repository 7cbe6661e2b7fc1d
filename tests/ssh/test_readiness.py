"""Readiness that cannot be fooled, over a real sshd with the simulated node (issue 9)."""

from __future__ import annotations

import http.server
import json
import signal
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import Inventory, parse_inventory
from firedup.errors import ForeignListenerError, NotReadyError, ServerCrashedError
from firedup.launch.runs import RunMeta, stop_run
from firedup.logscan import Phase, Reason, ScanState
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.readiness.wait import NO_HOOKS, WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import WaitStatus
from tests.conftest import (
    FAB,
    REPO,
    Sshd,
    fab,
    session_members,
    sim_deployment,
    ssh_host,
    start_sshd,
    stop_process,
    stop_runs,
    tree_roots,
    wait_until,
)

pytestmark = pytest.mark.ssh

TICK_S = 0.5


class Node:
    """One host on the test sshd, started runs tracked so teardown stops only ours."""

    def __init__(self, sshd: Sshd, tmp: Path, deployment: dict[str, Any], **env: str) -> None:
        self.workdir = tmp / "node"
        self.events = tmp / "sim-events.jsonl"
        host = ssh_host(sshd, self.workdir, "d")
        host["env"] = {**host["env"], "FIREDUP_SIM_EVENTS": str(self.events), **env}
        self.inventory: Inventory = parse_inventory(
            {"hosts": {"n": host}, "deployments": {"d": deployment}}, tmp / "hosts.yaml"
        )
        self.spec = self.inventory.host("n")
        self.deployment = self.inventory.deployment_for(self.spec)
        self.node = SshNode(self.spec)
        self.runs: list[RunMeta] = []

    def start(self) -> RunMeta:
        run = start_plan(self.node, plan_deploy(self.spec, self.deployment))
        self.runs.append(run)
        return run

    def wait(
        self, run: RunMeta, timeout_s: float = 60, hooks: WaitHooks = NO_HOOKS, **options: Any
    ) -> tuple[WaitStatus, list[WaitStatus]]:
        seen: list[WaitStatus] = []
        opts = WaitOptions(timeout_s=timeout_s, tick_s=TICK_S, **options)
        watched = replace(hooks, on_status=seen.append)
        return wait_ready(self.node, run, opts, watched), seen

    def sim_event(self, name: str) -> float:
        for line in self.events.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == name:
                return float(event["t"])
        raise AssertionError(f"the simulator recorded no {name!r} event")

    def close(self) -> None:
        for run in self.runs:
            stop_run(self.node, run, grace_s=2)
        self.node.close()


@pytest.fixture
def make_node(sshd: Sshd, tmp_path: Path) -> Iterator[Callable[..., Node]]:
    nodes: list[Node] = []

    def make(deployment: dict[str, Any] | None = None, **env: str) -> Node:
        node = Node(sshd, tmp_path / f"n{len(nodes)}", deployment or sim_deployment(), **env)
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.close()


def test_ready_only_when_every_signal_agrees(make_node: Callable[..., Node]) -> None:
    # A slower simulated node, so that warmup lasts several looks even on a busy machine.
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_SPEED="0.3")
    status, seen = node.wait(node.start())
    assert status.ready
    s = status.signals
    assert (s.alive, s.log_ready, s.listening, s.health) == (True, True, True, 200)
    # SGLang's port opens before warmup: a look in between saw it listening yet not ready.
    early = [x for x in seen if x.signals.listening and not x.ready]
    assert early, "no status between the port opening and ready"
    assert all(x.phase in {Phase.HTTP_UP, Phase.WARMUP} for x in early), early
    assert any(x.signals.health == 503 for x in early)
    assert all(not x.ready for x in seen[:-1])


def test_ready_is_known_without_waiting_out_sglangs_health_second(
    make_node: Callable[..., Node],
) -> None:
    """Once the ready line is read, the look asks SGLang's /server_info (readiness/watch.
    LIVENESS), not /health, which answers after a second at the soonest: ready is reported
    within a look of the line, the second not added to every deploy."""
    node = make_node(FIREDUP_SIM_SPEED="1")
    status, _ = node.wait(node.start())
    reported = time.time()
    assert status.ready and status.signals.health == 200
    lag = reported - node.sim_event("ready")
    assert lag < 0.9, f"ready reported {lag:.2f} s after the line"


class _Always200(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_stale_listener_is_not_our_server(make_node: Callable[..., Node]) -> None:
    deployment = sim_deployment()
    stale = socketserver.TCPServer(("127.0.0.1", deployment["port"]), _Always200)
    threading.Thread(target=stale.serve_forever, daemon=True).start()
    try:
        node = make_node(deployment)
        run = node.start()
        with pytest.raises(ForeignListenerError, match=f"port {deployment['port']} is held by"):
            node.wait(run)
    finally:
        stale.shutdown()
        stale.server_close()


CRASHES = [
    ("nccl_error", Phase.INIT_DISTRIBUTED, Reason.NCCL, {}),
    ("oom_load", Phase.LOADING_WEIGHTS, Reason.OOM, {}),
    ("oom_capture", Phase.CUDA_GRAPH, None, {}),
    ("warmup_fail", Phase.WARMUP, Reason.WARMUP_FAILED, {}),
]


@pytest.mark.parametrize(
    ("fault", "phase", "reason", "extra"), CRASHES, ids=[c[0] for c in CRASHES]
)
def test_a_crash_in_each_phase_is_reported_fast(
    make_node: Callable[..., Node],
    fault: str,
    phase: Phase,
    reason: Reason | None,
    extra: dict[str, str],
) -> None:
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_FAULT=fault, **extra)
    run = node.start()
    with pytest.raises(ServerCrashedError) as err:
        node.wait(run)
    noticed = time.time()
    message = str(err.value)
    assert f"phase {phase.value}" in message or phase.value in message
    if reason is not None:
        assert f": {reason.value}" in message
    assert run.log_path in message
    lag = noticed - node.sim_event("crashed")
    assert lag < 2 * TICK_S + 0.5, f"crash noticed {lag:.2f}s after it happened"


def test_a_silent_hang_ends_naming_the_phase(make_node: Callable[..., Node]) -> None:
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_FAULT="nccl_hang")
    run = node.start()
    started = time.monotonic()
    with pytest.raises(NotReadyError) as err:
        node.wait(run, timeout_s=4, stall_after_s=1, phase_budgets_s={"init_distributed": 1})
    assert time.monotonic() - started < 8
    assert "stuck in phase init_distributed" in str(err.value)
    assert "still running" in str(err.value)


def test_a_slow_capture_that_keeps_moving_does_not_fail(make_node: Callable[..., Node]) -> None:
    """The capture's first batch holds the bar at 0/23 for seconds: the wait sees it there
    (through the reader's states, which carry the bar between looks: a look every few seconds
    while loading can miss it, as CI once did) and does not call it a stall."""
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_FAULT="slow_capture", FIREDUP_SIM_SPEED="1")
    scans: list[ScanState] = []
    status, _ = node.wait(node.start(), timeout_s=90, hooks=WaitHooks(on_scan=scans.append))
    assert status.ready
    captures = [s for s in scans if s.phase is Phase.CUDA_GRAPH and s.progress]
    assert captures, "never saw the capture bar"
    assert any(s.progress and s.progress.done == 0 for s in captures)


def test_sshd_restart_mid_wait(tmp_path: Path) -> None:
    proc, sshd = start_sshd(tmp_path / "own-sshd")
    node = Node(sshd, tmp_path, sim_deployment(tp=2), FIREDUP_SIM_SPEED="0.25")
    try:
        run = node.start()
        restarted: list[str] = []

        def restart_once(status: WaitStatus) -> None:
            nonlocal proc
            if restarted or status.scan.phase.order < Phase.LOADING_WEIGHTS.order:
                return
            restarted.append(status.scan.phase.value)
            # End our sshd and the session processes it forked (ours, by pid): the link drops.
            children = [
                int(p)
                for p in subprocess.run(
                    ["ps", "-o", "pid=", "--ppid", str(sshd.pid)], capture_output=True, text=True
                ).stdout.split()
            ]
            stop_process(proc)
            for pid in children:
                subprocess.run(["kill", "-KILL", str(pid)], check=False)
            proc, _ = start_sshd(tmp_path / "own-sshd", port=sshd.port)

        reconnects: list[str] = []
        opts = WaitOptions(timeout_s=90, tick_s=TICK_S)
        status = wait_ready(
            node.node, run, opts, WaitHooks(on_status=restart_once, on_reconnect=reconnects.append)
        )
        assert restarted and reconnects, "the connection never dropped"
        assert status.ready
        tree = session_members(int(run.pid or 0))
        assert tree_roots(tree) == [run.pid]  # exactly one server tree: everything hangs off it
        assert len(tree) >= 3  # the launcher and its two TP ranks (and the sim's helpers)
        launches = list((node.workdir / "runs").iterdir())
        assert len(launches) == 1
    finally:
        node.close()  # stops the runs it started, whatever the asserts said
        stop_process(proc)


def test_ctrl_c_leaves_the_server_running_and_wait_reattaches(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    workdir = tmp_path / "node"
    inv = write_inventory(
        {
            "node": ssh_host(
                sshd,
                workdir,
                "d",
                env={**ssh_host(sshd, workdir, "d")["env"], "FIREDUP_SIM_SPEED": "0.3"},
            )
        },
        {"d": sim_deployment(tp=2)},
    )
    deploy = subprocess.Popen(
        [FAB, "deploy", "--host", "node", "--inventory", str(inv)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        pid_path = workdir / "current" / "pid"
        wait_until(
            lambda: pid_path.exists() and pid_path.read_text().strip(), 30, "the run to start"
        )
        pid = int(pid_path.read_text())
        deploy.send_signal(signal.SIGINT)
        _out, err = deploy.communicate(timeout=20)
        assert deploy.returncode == 130, err
        assert "the server keeps running" in err and "fab wait --host node" in err
        assert pid in session_members(pid)

        again = fab("wait", "--host", "node", "--inventory", str(inv))
        assert again.returncode == 0, again.stderr
        assert "READY" in again.stdout and str(pid) in again.stdout
    finally:
        if deploy.poll() is None:
            deploy.kill()
        stop_runs(inv)
