"""Log classifier throughput: runs bench/logscan_throughput.py and keeps its numbers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from bench.tools import BENCH
from tests.conftest import REPO

_CHUNK = re.compile(r"chunks of\s+(\d+) KiB:\s+([\d.]+) s\s+([\d.]+) MB/s")
_MARGINAL = re.compile(r"marginal rate: ([\d.]+) MB/s \(2nd quarter\), ([\d.]+) MB/s")


def run_throughput(mb: float, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH / "logscan_throughput.py"), "--mb", str(mb)]
    argv += ["--repeat", str(repeat)]
    proc = subprocess.run(
        argv, capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    for line in proc.stdout.splitlines():
        log(f"  {line.strip()}")
    if proc.returncode != 0:
        log(proc.stderr)
        return {"ok": False, "stderr": proc.stderr[-2000:]}
    chunks = {f"{int(k)} KiB": float(rate) for k, _s, rate in _CHUNK.findall(proc.stdout)}
    marginal = _MARGINAL.search(proc.stdout)
    return {
        "ok": True,
        "log_mb": mb,
        "best_of": repeat,
        "mb_per_s_by_chunk": chunks,
        "marginal_mb_per_s": [float(x) for x in marginal.groups()] if marginal else None,
        "output": proc.stdout,
    }
