"""Fleet scaling: 1, 4 and 16 hosts, wall time T(N)/T(1).

There is no fleet deploy command yet, so two things that exist are measured:
- deploy: N hosts deployed in parallel from a thread pool over the core API (`plan_deploy` +
  `apply_deploy`, one SshNode per host), as a fleet command would; timed to the last READY.
- status: `fab status --host h0,h1,...` (the CLI runs hosts in parallel, up to 16 threads),
  with the N servers up; timed from the command's start to its exit.
Every "host" is an inventory entry on the same sshd with its own workdir, port and simulated
GPU state, so all N servers run on this one machine: T(N) includes N servers starting on 2
cores, which a real fleet (N machines) would not pay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.rig import Rig
from firedup.config.inventory import Inventory
from firedup.launch.runs import current_run, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import apply_deploy, plan_deploy, wait_options
from tests.conftest import SIM_MODELS, fab, free_port

SPEED = "1000"


@dataclass
class FleetSample:
    hosts: int
    deploy_s: list[float] = field(default_factory=list)
    status_s: list[float] = field(default_factory=list)
    deploy_ok: bool = True
    status_ok: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def fleet_inventory(rig: Rig, n: int) -> tuple[Inventory, Path]:
    where = rig.fresh_dir(f"fleet{n}")
    hosts, deployments = {}, {}
    for i in range(n):
        workdir = where / f"h{i}"
        hosts[f"h{i}"] = rig.host_entry(workdir, f"d{i}", FIREDUP_SIM_SPEED=SPEED)
        deployments[f"d{i}"] = {
            "engine": "sglang",
            "model": str(SIM_MODELS / "tiny-llama"),
            "port": free_port(),
        }
    return rig.inventory(where, hosts, deployments)


def _deploy_one(inv: Inventory, name: str) -> bool:
    spec = inv.host(name)
    deployment = inv.deployment_for(spec)
    node = SshNode(spec)
    try:
        status = apply_deploy(node, plan_deploy(spec, deployment), wait_options(deployment, 120, 1))
        return status.ready
    finally:
        node.close()


def _stop_one(inv: Inventory, name: str) -> None:
    spec = inv.host(name)
    node = SshNode(spec)
    try:
        run = current_run(node, spec)
        if run is not None:
            stop_run(node, run, grace_s=2)
    finally:
        node.close()


def _deploy_all(inv: Inventory, names: list[str]) -> tuple[float, bool]:
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(lambda n: _deploy_one(inv, n), names))
    return time.monotonic() - t0, all(results)


def measure_fleet(rig: Rig, n: int, deploys: int, statuses: int) -> FleetSample:
    inv, path = fleet_inventory(rig, n)
    names = sorted(inv.hosts, key=lambda h: int(h[1:]))
    sample = FleetSample(n)
    pool = ThreadPoolExecutor(max_workers=n)
    try:
        for round_ in range(deploys):
            wall, ok = _deploy_all(inv, names)
            sample.deploy_s.append(wall)
            sample.deploy_ok &= ok
            if round_ < deploys - 1:
                list(pool.map(lambda h: _stop_one(inv, h), names))
        for _ in range(statuses):
            t0 = time.monotonic()
            result = fab("status", "--host", ",".join(names), "--inventory", str(path))
            sample.status_s.append(time.monotonic() - t0)
            rows = [ln.split() for ln in result.stdout.splitlines()[1:]]
            ready = sum(1 for row in rows if len(row) > 5 and row[5] == "ready")
            sample.status_ok &= result.returncode == 0 and ready == n
    finally:
        list(pool.map(lambda h: _stop_one(inv, h), names))
        pool.shutdown()
    return sample


def run_fleet(
    rig: Rig, sizes: list[int], deploys: int, statuses: int, log: Callable[[str], None]
) -> list[FleetSample]:
    samples = []
    for n in sizes:
        s = measure_fleet(rig, n, deploys, statuses)
        samples.append(s)
        log(
            f"  N={n:2d}  deploy {', '.join(f'{x:.2f}s' for x in s.deploy_s)} ok={s.deploy_ok}  "
            f"status {', '.join(f'{x:.2f}s' for x in s.status_s)} ok={s.status_ok}"
        )
    return samples
