"""The real sglang-router (from the package index, in the test venv) on loopback, and a
fleet of simulated SGLang workers over the real sshd to hand it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Sshd, free_port, free_ports, sim_deployment, ssh_host, stop_runs


class RealRouter:
    """`python -m sglang_router.launch_router` in its own session; we end its group only.

    Retries and the circuit breaker are off: a request sent to a worker that is going away
    fails instead of being quietly retried elsewhere, so the tests see every mistake."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable, "-m", "sglang_router.launch_router",
            "--host", "127.0.0.1", "--port", str(self.port), "--policy", "round_robin",
            "--disable-retries", "--disable-circuit-breaker", "--log-level", "warn",
            # its Prometheus exporter defaults to port 29000: one router per test, own port
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
        ]  # fmt: skip
        self.log = log
        self.proc = subprocess.Popen(
            argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.workers()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"sglang-router did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def get(self, path: str) -> Any:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + path, timeout=5) as response:
            return json.loads(response.read())

    def workers(self) -> dict[str, bool]:
        """url -> healthy, as the router lists them now."""
        return {w["url"]: bool(w["is_healthy"]) for w in self.get("/workers")["workers"]}

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def real_router(tmp_path: Path) -> Iterator[RealRouter]:
    router = RealRouter(tmp_path / "router.log")
    try:
        yield router
    finally:
        router.close()


LATENCY_S = "0.15"  # each request stays in flight this long: a roll meets requests under way


def fleet_inventory(sshd: Sshd, root: Path, router_url: str, names: list[str]) -> Path:
    """One simulated SGLang worker per name, each its own node workdir and port, all behind
    the router, in group `fleet`."""
    ports = free_ports(len(names))
    hosts, deployments = {}, {}
    for name, port in zip(names, ports, strict=True):
        host = ssh_host(sshd, root / name, name)
        host["env"] = {
            **host["env"],
            "FIREDUP_SIM_SPEED": "4",
            "FIREDUP_SIM_REQUEST_LATENCY_S": LATENCY_S,
        }
        hosts[name] = host
        deployments[name] = sim_deployment(
            port=port, router={"url": router_url, "drain_timeout_s": 20}, ready_timeout_s=90
        )
    path = root / "hosts.yaml"
    write_fleet(path, hosts, deployments, names)
    return path


def write_fleet(path: Path, hosts: dict, deployments: dict, names: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"hosts": hosts, "deployments": deployments, "groups": {"fleet": names}}
    path.write_text(yaml.safe_dump(data))


def change_deployment(path: Path, name: str, **changes: Any) -> None:
    data = yaml.safe_load(path.read_text())
    data["deployments"][name].update(changes)
    path.write_text(yaml.safe_dump(data))


def change_env(path: Path, name: str, **env: str) -> None:
    data = yaml.safe_load(path.read_text())
    data["hosts"][name]["env"].update(env)
    path.write_text(yaml.safe_dump(data))


@pytest.fixture
def fleet(
    sshd: Sshd, tmp_path: Path, real_router: RealRouter
) -> Iterator[Callable[[list[str]], Path]]:
    made: list[Path] = []

    def make(names: list[str]) -> Path:
        path = fleet_inventory(sshd, tmp_path / "fleet", real_router.url, names)
        made.append(path)
        return path

    yield make
    for path in made:
        stop_runs(path)
