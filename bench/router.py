"""Through the real sglang-router during a restart of every worker: firedup's rolling
restart (leave, drain, restart, rejoin when truly ready, one worker at a time) against the
naive way (the workers registered with the router once, then `fab restart` of each in turn,
the router left to find out through its own health checks).

Three simulated SGLang workers over the bench's sshd, requests through the router at a fixed
rate (tests/loadgen.py), each taking 0.15 s at the worker; the router runs with retries and
the circuit breaker off, so a request sent to a worker going away fails and is counted.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.report import fmt, table
from bench.rig import Rig
from tests.conftest import FAB
from tests.loadgen import Load
from tests.router.conftest import RealRouter, fleet_inventory

NAMES = ["w1", "w2", "w3"]
RATE_PER_S = 8.0


def _fab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FAB, *args], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )


def _add_by_hand(router: RealRouter, inv: Path) -> None:
    """The naive set-up: each worker given to the router once, as its docs show."""
    deployments = yaml.safe_load(inv.read_text())["deployments"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for name in NAMES:
        body = json.dumps({"url": f"http://127.0.0.1:{deployments[name]['port']}"}).encode()
        request = urllib.request.Request(
            router.url + "/workers", data=body, headers={"Content-Type": "application/json"}
        )
        opener.open(request, timeout=10).read()
    deadline = time.monotonic() + 30
    while len([ok for ok in router.workers().values() if ok]) < len(NAMES):
        if time.monotonic() > deadline:
            raise RuntimeError(f"router never listed the workers: {router.workers()}")
        time.sleep(0.2)


def _one(rig: Rig, mode: str, log: Callable[[str], None]) -> dict[str, Any]:
    root = rig.fresh_dir(f"router-{mode}")
    router = RealRouter(root / "router.log")
    inv = fleet_inventory(rig.sshd, root, router.url, NAMES)
    try:
        if mode == "naive":
            data = yaml.safe_load(inv.read_text())
            for d in data["deployments"].values():
                d.pop("router")
            inv.write_text(yaml.safe_dump(data))
        done = _fab("deploy", "--host", "fleet", "--inventory", str(inv), "--plain")
        if done.returncode != 0:
            raise RuntimeError(f"deploy failed: {done.stderr[-2000:]}")
        if mode == "naive":
            _add_by_hand(router, inv)
        started = time.monotonic()
        with Load(router.url, RATE_PER_S) as load:
            time.sleep(1.0)
            if mode == "rolling":
                results = [_fab("restart", "--rolling", "--host", "fleet", "--inventory", str(inv))]
            else:
                results = [_fab("restart", "--host", n, "--inventory", str(inv)) for n in NAMES]
            time.sleep(1.0)
        summary = load.tally.summary()
        summary.update(
            mode=mode,
            wall_s=time.monotonic() - started,
            restart_ok=all(r.returncode == 0 for r in results),
        )
        log(f"  {mode}: {summary['failed']} of {summary['sent']} failed, p99 {summary['p99_s']}s")
        return summary
    finally:
        _fab("stop", "--host", "fleet", "--inventory", str(inv))
        router.close()


def run_router(rig: Rig, repeats: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    return [_one(rig, mode, log) for _ in range(repeats) for mode in ("rolling", "naive")]


def render_router(samples: list[dict[str, Any]]) -> str:
    rows = [
        [
            s["mode"],
            str(s["sent"]),
            str(s["failed"]),
            fmt(s["p50_s"]),
            fmt(s["p99_s"]),
            fmt(s["wall_s"], digits=1),
            "yes" if s["restart_ok"] else "no",
        ]
        for s in samples
    ]
    return table(["restart", "requests", "failed", "p50", "p99", "wall", "every restart ok"], rows)
