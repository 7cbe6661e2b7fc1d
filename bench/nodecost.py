"""What a wait's node-side reader costs the node, on its own (no sshd, no link): a quiet log
while loading (a look every 10 s), a quiet log once the port may be open (a look every
second), and a log growing at 1 MB/s of NCCL INFO lines. The reader is started exactly as a
wait starts it (shipping.reader_argv, the node's python3); its CPU (with its children, the
looks) over the window, as a share of one core, start-up included.

    .venv/bin/python -m bench.nodecost [WINDOW_S]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from firedup.node.base import script_text
from firedup.readiness.shipping import new_nonce, reader_argv

LINE = b"gpu-node:4242:4301 [1] NCCL INFO Channel 01/32 : 1[1] -> 2[2] via P2P/CUMEM/read\n"
START = (
    b"[2026-12-01 10:00:00] server_args=ServerArgs(model_path='m')\nInit torch distributed begin.\n"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / CLK_TCK


def reader_cpu_pct(rate_bps: float, window_s: float, near: bool) -> float:
    root = Path(tempfile.mkdtemp(prefix="nodecost-"))
    log = root / "server.log"
    log.write_bytes(START)
    server = subprocess.Popen(["sleep", str(window_s + 30)], start_new_session=True)
    (root / "pid").write_text(str(server.pid))
    look = {
        "script": script_text("probe"),
        "args": [str(root), "1"],
        "health_url": "http://127.0.0.1:1/health",
        "tick_s": 1.0,
        "loading_s": 1.0 if near else 10.0,
        "inproc": True,
    }
    options = {"log": str(log), "offset": 0, "pid": server.pid, "engine": "sglang", "look": look}
    started = time.monotonic()
    reader = subprocess.Popen(reader_argv(options, new_nonce(), ["true"]), stdout=subprocess.PIPE)
    assert reader.stdout is not None
    threading.Thread(target=lambda: reader.stdout.read(), daemon=True).start()  # type: ignore[union-attr]
    block = LINE * max(1, int(rate_bps / 10 / len(LINE))) if rate_bps else b""
    with log.open("ab") as fh:
        while time.monotonic() - started < window_s:
            if block:
                fh.write(block)
                fh.flush()
            time.sleep(0.1)
    cpu = _cpu_s(reader.pid)
    elapsed = time.monotonic() - started
    for proc in (reader, server):
        proc.kill()
        proc.wait()
    return 100 * cpu / elapsed


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    print(f"| case ({window:g} s, start-up included) | node CPU, % of a core |")
    print("|---|---|")
    for name, rate, near in (
        ("quiet, loading (a look every 10 s)", 0.0, False),
        ("quiet, port may be open (a look every 1 s)", 0.0, True),
        ("noisy, 1 MB/s of log", 1e6, False),
    ):
        print(f"| {name} | {reader_cpu_pct(rate, window, near):.2f}% |")


if __name__ == "__main__":
    main()
