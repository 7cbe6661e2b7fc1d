"""Fleets from one laptop: `fab deploy` and `fab status` over N hosts, T(N)/T(1), and what the
operator's own process pays per host (CPU seconds, peak memory).

Every host is an inventory entry on the bench's sshd with its own workdir and port; the
engine is bench/nodeside/cheap_engine.py (one stdlib process that prints SGLang's lines and
answers HTTP 200), so 64 servers fit on two cores and the measure is firedup's own work.
Both commands run as the real CLI in a child process: wall time from its start to its exit,
and its rusage (os.wait4: user + system CPU, peak RSS) for the operator's side. The node side
(sshd, preflight's python, the log reader, the probes) runs on the same two cores, which 64
real machines would not share: its CPU is reported beside it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.rig import Rig, node_cpu_s
from bench.tools import BENCH
from firedup.config.inventory import Inventory
from firedup.launch.runs import current_run, stop_run
from firedup.node.ssh import SshNode
from tests.conftest import FAB, REPO, SIM_MODELS, free_ports

CHEAP_PYTHON = str(BENCH / "nodeside" / "cheap-python")


@dataclass
class Timed:
    wall_s: float
    cpu_s: float  # the operator's process: user + system
    peak_rss_mb: float
    node_cpu_s: float
    ok: bool
    tail: str = ""


@dataclass
class FleetSample:
    hosts: int
    deploy: list[Timed] = field(default_factory=list)
    status: list[Timed] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "deploy": [t.__dict__ for t in self.deploy],
            "status": [t.__dict__ for t in self.status],
        }


def fleet_inventory(rig: Rig, n: int) -> tuple[Inventory, Path]:
    where = rig.fresh_dir(f"fleet{n}")
    hosts, deployments = {}, {}
    ports = free_ports(n)
    for i in range(n):
        entry = rig.host_entry(where / f"h{i}", f"d{i}")
        entry["python"] = CHEAP_PYTHON
        hosts[f"h{i}"] = entry
        deployments[f"d{i}"] = {
            "engine": "sglang",
            "model": str(SIM_MODELS / "tiny-llama"),
            "port": ports[i],
            "ready_timeout_s": 300,
        }
    return rig.inventory(where, hosts, deployments)


def timed_fab(rig: Rig, *args: str, ok: Callable[[int, str], bool]) -> Timed:
    """The CLI in a child process; its wall time and its own rusage (threads included)."""
    cpu0 = node_cpu_s(rig.sshd_pid)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [FAB, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    return Timed(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        node_cpu_s=node_cpu_s(rig.sshd_pid) - cpu0,
        ok=ok(proc.returncode, out),
        tail=out[-3000:] if proc.returncode else "",
    )


def _stop_all(inv: Inventory, names: list[str]) -> None:
    def one(name: str) -> None:
        spec = inv.host(name)
        node = SshNode(spec)
        try:
            run = current_run(node, spec)
            if run is not None:
                stop_run(node, run, grace_s=2)
        finally:
            node.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, names))


def measure_fleet(rig: Rig, n: int, deploys: int, statuses: int, deploy: bool) -> FleetSample:
    """Each deploy round gets fresh hosts (workdirs, ports): a port the last round's server
    just let go of is not a test of firedup. `status` runs over the last round's servers."""
    sample = FleetSample(n)
    inv, path = fleet_inventory(rig, n)
    try:
        for round_ in range(deploys if deploy else 0):
            if round_:
                _stop_all(inv, list(inv.hosts))
                inv, path = fleet_inventory(rig, n)
            names = ",".join(sorted(inv.hosts, key=lambda h: int(h[1:])))
            argv = ["deploy", "--host", names, "--inventory", str(path)]
            sample.deploy.append(
                timed_fab(rig, *argv, ok=lambda code, out: code == 0 and out.count("READY") >= n)
            )
        want = "ready" if deploy else "never-deployed"
        names = ",".join(sorted(inv.hosts, key=lambda h: int(h[1:])))
        for _ in range(statuses):
            argv = ["status", "--host", names, "--inventory", str(path)]
            sample.status.append(
                timed_fab(rig, *argv, ok=lambda code, out: code == 0 and out.count(want) >= n)
            )
    finally:
        if deploy:
            _stop_all(inv, list(inv.hosts))
    return sample


def run_fleet(
    rig: Rig,
    sizes: list[int],
    deploys: int,
    statuses: int,
    log: Callable[[str], None],
    status_only: list[int] | None = None,
) -> list[FleetSample]:
    samples = []
    plan = [(n, True) for n in sizes] + [(n, False) for n in status_only or []]
    for n, deploy in plan:
        s = measure_fleet(rig, n, deploys, statuses, deploy)
        samples.append(s)
        for what, runs in (("deploy", s.deploy), ("status", s.status)):
            for t in runs:
                log(
                    f"  N={n:3d} {what:6s} {t.wall_s:6.2f}s ok={t.ok} operator cpu "
                    f"{t.cpu_s:5.2f}s rss {t.peak_rss_mb:5.0f} MB node cpu {t.node_cpu_s:5.1f}s"
                    + (f"\n{t.tail}" if t.tail else "")
                )
    return samples
