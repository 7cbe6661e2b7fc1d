"""The node's CPU spent by the watch (issue 25) over a quiet stretch of a ready server.

A deployment with `restart:` is deployed over our sshd (the real `fab deploy`); once its watch
runs, nothing happens for WINDOW_S: the watch checks the run every `every_s` (the process and
its session from /proc, the port, /health over loopback, the log). The watch's own CPU (utime +
stime of its process and its children, from /proc) over the window, as a share of one core,
for the default cadence (10 s) and a fast one (1 s). The server's answers to /health are the
server's CPU, not the watch's, and are not counted.

    .venv/bin/python -m bench.watch_cpu [--window 600] [--every 10 ...]   # 10 quiet minutes
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.rig import CLK_TCK, Rig
from tests.conftest import FAB, REPO, SIM_MODELS, free_port, wait_until

WINDOW_S = 60.0
CADENCES_S = (10.0, 1.0)


@dataclass
class WatchCpu:
    every_s: float
    window_s: float
    cpu_s: float
    checks: int

    @property
    def pct_of_core(self) -> float:
        return 100.0 * self.cpu_s / self.window_s

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "pct_of_core": self.pct_of_core}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / CLK_TCK


def measure(rig: Rig, every_s: float, window_s: float) -> WatchCpu:
    workdir = rig.fresh_dir("watch")
    host = rig.host_entry(workdir, "d")
    deployment = {
        "engine": "sglang",
        "model": str(SIM_MODELS / "tiny-llama"),
        "port": free_port(),
        "restart": {"on": "failure", "max": 3},
        "watch": {"every_s": every_s},
    }
    _, inv = rig.inventory(workdir, {"n": host}, {"d": deployment})
    fab = [FAB, "--host", "n", "--inventory", str(inv)]
    done = subprocess.run(
        [FAB, "deploy", *fab[1:]], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    try:
        pid = int((workdir / "watch" / "identity").read_text().split()[0])
        view = workdir / "current" / "watch.json"
        wait_until(lambda: view.exists(), 30, "the watch's first check")
        cpu0, t0 = _cpu_s(pid), time.monotonic()
        checked0 = json.loads(view.read_text())["checked_at"]
        time.sleep(window_s)  # the measurement window: nothing to wait for
        cpu1, t1 = _cpu_s(pid), time.monotonic()
        checked1 = json.loads(view.read_text())["checked_at"]
        checks = round((checked1 - checked0) / every_s)
        return WatchCpu(every_s, t1 - t0, cpu1 - cpu0, checks)
    finally:
        subprocess.run([FAB, "stop", *fab[1:]], cwd=REPO, capture_output=True, timeout=120)


def run_watch_cpu(
    rig: Rig, window_s: float = WINDOW_S, cadences: tuple[float, ...] = CADENCES_S
) -> list[WatchCpu]:
    return [measure(rig, every, window_s) for every in cadences]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=WINDOW_S, help="seconds per cadence")
    parser.add_argument("--every", type=float, action="append", help="a cadence (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="firedup-bench-watch-") as scratch:
        rig = Rig(Path(scratch))
        try:
            samples = run_watch_cpu(rig, args.window, tuple(args.every or CADENCES_S))
        finally:
            rig.close()
    for s in samples:
        print(
            f"every {s.every_s:g}s: {s.cpu_s:.3f} CPU-s over {s.window_s:.0f}s "
            f"({s.checks} checks) = {s.pct_of_core:.3f}% of a core; "
            f"per check {1000 * s.cpu_s / max(s.checks, 1):.1f} ms"
        )
    print(json.dumps([s.as_dict() for s in samples]))


if __name__ == "__main__":
    main()
